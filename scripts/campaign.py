#!/usr/bin/env python3
"""Hardening campaign: hostile inputs against the scheduler binary, and a table of what happened to each.

Usage: scripts/campaign.py [--bin PATH] [--seed N] [--random N] [--out FILE] [--only CATEGORY,...]
       (`make campaign`; needs python3-yaml, and openssl for the https cases)

Categories (each input run as the binary would be, with a time limit):
  config-invalid   hand-written configurations upstream's validation refuses (and a few valid odd ones)
  config-random    random mutations of the shipped configurations (examples/*/profile.yaml, deploy/)
  cluster-invalid  hand-written cluster objects the API server refuses (and a few valid odd ones)
  cluster-random   random mutations of examples/*/cluster.yaml
  quantities       generated quantities as a pod's CPU request: placed exactly when it fits (checked in Python)
  plugin-files     random, truncated and bit-flipped files given to `plugin check`
  guests           the hostile fixtures at every mode and policy, the garbling C guest at several seeds
  sources          hostile OCI registries and https plugin servers on 127.0.0.1 (trickling, huge, lying about
                   lengths or digests, redirecting inwards, echoing secrets or escapes in error bodies), each with
                   `pullTimeout: 3s`; besides the exit, the run is `wrong` if it outlived the deadline, asked a
                   server it was redirected to, or printed a secret, an escape or a line over 1000 characters
  hostile-https    the live scheduler's HTTPS port (10259) against hostile clients: slow handshakes, slowloris
                   headers, idle TLS connections past the cap, huge headers, many HTTP/2 streams (own table:
                   each case is clean when the server cut what it should, /healthz kept answering and the open
                   file descriptors stayed bounded)

Outcomes: `clear` (exit 2, one line on stderr), `accepted` (exit 0), `panic` (exit 101 or a panic message),
`hang` (past the time limit), `unclear` (another exit, or an error of more than one line), `wrong` (the run
finished but its result is not the right one), `silent` (an input that must be refused was accepted).
Exit status 1 when any input panicked, hung, was wrong or unclear, or an invalid one was silently accepted.
"""

import argparse
import copy
import hashlib
import json
import os
import random
import re
import shutil
import socket
import socketserver
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from decimal import Decimal, ROUND_CEILING
from pathlib import Path

import yaml  # PyYAML (Debian python3-yaml)

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 30
API = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
GUESTS = ROOT / "guest-plugins" / "build"


class Campaign:
    def __init__(self, binary, work):
        self.bin = binary
        self.work = Path(work)
        self.rows = {}
        self.problems = []
        self.n = 0

    def file(self, name, text):
        self.n += 1
        p = self.work / f"{self.n}-{name}"
        if isinstance(text, bytes):
            p.write_bytes(text)
        else:
            p.write_text(text)
        return p

    def run(self, args, timeout=TIMEOUT, env=None):
        try:
            r = subprocess.run([str(self.bin), *map(str, args)], capture_output=True, timeout=timeout,
                               env={**os.environ, "KWS_LOG": "error", **(env or {})})
        except subprocess.TimeoutExpired:
            return "hang", "", ""
        out, err = r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
        if r.returncode == 101 or "panicked at" in err:
            return "panic", out, err
        if r.returncode == 0:
            return "accepted", out, err
        lines = [l for l in err.splitlines() if l.strip()]
        if r.returncode == 2 and len(lines) == 1:
            return "clear", out, err
        return "unclear", out, err

    def count(self, category, outcome, what, detail=""):
        row = self.rows.setdefault(category, {})
        row[outcome] = row.get(outcome, 0) + 1
        if outcome in ("panic", "hang", "unclear", "wrong", "silent"):
            self.problems.append(f"{category}: {outcome}: {what}: {detail.strip()[:300]}")

    # ---- configurations ----

    def simulate(self, config_text, cluster_text=None, extra=(), env=None):
        cfg = self.file("config.yaml", config_text)
        cl = self.file("cluster.yaml", cluster_text if cluster_text is not None else BASE_CLUSTER)
        return self.run(["simulate", "--config", cfg, "--cluster", cl, *extra], env=env)

    def config_invalid(self):
        for name, text, valid in config_cases():
            outcome, _, err = self.simulate(text)
            if outcome == "accepted" and not valid:
                outcome = "silent"
            elif outcome == "clear" and valid:
                outcome = "wrong"
            self.count("config-invalid", outcome, name, err)

    def config_random(self, rng, n):
        bases = [yaml.safe_load(p.read_text()) for p in sorted(ROOT.glob("examples/*/profile.yaml"))]
        deploy = yaml.safe_load_all((ROOT / "deploy/manifests/config.yaml").read_text())
        for d in deploy:
            if isinstance(d, dict) and d.get("kind") == "ConfigMap":
                for v in d.get("data", {}).values():
                    bases.append(yaml.safe_load(v))
        for i in range(n):
            doc = mutate(copy.deepcopy(rng.choice(bases)), rng)
            text = yaml.safe_dump(doc, sort_keys=False) if not isinstance(doc, str) else doc
            # Relative component paths in the examples resolve against the configuration's directory.
            text = text.replace("../../guest-plugins/build/", str(GUESTS) + "/")
            outcome, _, err = self.simulate(text)
            self.count("config-random", outcome, f"mutation {i}", err)

    # ---- cluster files ----

    def cluster_invalid(self):
        for name, text, valid in cluster_cases():
            outcome, _, err = self.simulate(DEFAULT_CONFIG, text)
            if outcome == "accepted" and not valid:
                outcome = "silent"
            elif outcome == "clear" and valid:
                outcome = "wrong"
            self.count("cluster-invalid", outcome, name, err)

    def cluster_random(self, rng, n):
        bases = [list(yaml.safe_load_all(p.read_text())) for p in sorted(ROOT.glob("examples/*/cluster.yaml"))]
        for i in range(n):
            docs = copy.deepcopy(rng.choice(bases))
            k = rng.randrange(len(docs))
            docs[k] = mutate(docs[k], rng)
            text = "---\n".join(yaml.safe_dump(d, sort_keys=False) if not isinstance(d, str) else d for d in docs)
            outcome, _, err = self.simulate(DEFAULT_CONFIG, text)
            self.count("cluster-random", outcome, f"mutation {i}", err)

    # ---- quantities ----

    def quantities(self, rng, n):
        node_milli = 8000  # the node's allocatable CPU: "8"
        for i in range(n):
            q = random_quantity(rng)
            want = exact_milli(q)
            cluster = node_doc("n", "8") + "---\n" + pod_doc("p", q)
            outcome, out, err = self.simulate(DEFAULT_CONFIG, cluster)
            if want is None:
                # Not a quantity: refused, as the API server would.
                if outcome == "accepted":
                    outcome = "silent"
                self.count("quantities", outcome, f"{q!r}", err)
                continue
            if outcome != "accepted":
                if want < 0 and outcome == "clear":
                    self.count("quantities", "clear", q)  # negative requests are refused
                else:
                    self.count("quantities", outcome if outcome != "clear" else "wrong", f"{q!r}", err)
                continue
            where = placements(out)
            placed = where.get("default/p") is not None
            pending = "default/p" in where and not placed
            fits = 0 <= want <= node_milli
            if want < 0:
                self.count("quantities", "silent", f"{q!r} (negative)", out)
            elif placed == fits and (placed or pending):
                self.count("quantities", "accepted", q)
            else:
                self.count("quantities", "wrong", f"{q!r}: {want} milli on a 8000 milli node, placed={placed}",
                           out)

    # ---- plugin files ----

    def plugin_files(self, rng, n):
        originals = [p.read_bytes() for p in sorted(GUESTS.glob("*.wasm")) if p.stat().st_size < 200_000]
        cases = [("empty", b""), ("text", b"hello"), ("magic only", b"\0asm"), ("core header", b"\0asm\x01\0\0\0")]
        for i in range(n):
            src = rng.choice(originals)
            kind = rng.choice(["truncate", "flip", "random", "splice"])
            if kind == "truncate":
                data = src[: rng.randrange(len(src))]
            elif kind == "flip":
                b = bytearray(src)
                for _ in range(rng.randint(1, 8)):
                    b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
                data = bytes(b)
            elif kind == "random":
                data = b"\0asm\x0d\0\x01\0" + rng.randbytes(rng.randrange(1, 4096))
            else:
                a = rng.randrange(len(src))
                data = src[:a] + rng.randbytes(rng.randrange(1, 64)) + src[a:]
            cases.append((f"{kind} {i}", data))
        for name, data in cases:
            p = self.file("plugin.wasm", data)
            outcome, _, err = self.run(["plugin", "check", p])
            self.count("plugin-files", outcome, name, err)
        # A file name that is not UTF-8.
        try:
            os.link(GUESTS / "qos-sort.wasm", os.fsencode(str(self.work)) + b"/plugin-\xff.wasm")
            r = subprocess.run([str(self.bin).encode(), b"plugin", b"check", os.fsencode(str(self.work)) +
                                b"/plugin-\xff.wasm"], capture_output=True, timeout=TIMEOUT)
            outcome = "panic" if r.returncode == 101 else ("accepted" if r.returncode == 0 else
                                                           "clear" if r.returncode == 2 else "unclear")
            self.count("plugin-files", outcome, "non-UTF-8 file name", r.stderr.decode(errors="replace"))
        except OSError:
            pass

    # ---- guests ----

    def guests(self):
        modes = ["ok", "loop", "grow", "trap-filter", "trap-score", "trap-normalize", "score-1000", "log-flood"]
        cluster = BASE_CLUSTER + "".join("---\n" + pod_doc(f"bad-{i}", "100m", "hostile") for i in range(3))
        for mode in modes:
            for policy in ["Fail", "Ignore"]:
                cfg = hostile_config("hostile", {"mode": mode}, policy, sort=False)
                outcome, out, err = self.simulate(cfg, cluster)
                if outcome == "accepted":
                    where = placements(out)
                    placed = sum(1 for p, n in where.items() if p.startswith("default/bad-") and n)
                    good = sum(1 for p, n in where.items() if p.startswith("default/good-") and n)
                    want = 3 if (policy == "Ignore" or mode in ("ok", "log-flood")) else 0
                    if placed != want or good != 3:
                        outcome = "wrong"
                self.count("guests", outcome, f"hostile {mode} {policy}", out + err)
        for mode in ["loop", "trap-filter", "ok"]:
            cfg = hostile_config("hostile-sort", {"mode": mode}, "Fail", sort=True)
            outcome, out, err = self.simulate(cfg, cluster)
            if outcome == "accepted" and sum(1 for n in placements(out).values() if n) != 6:
                outcome = "wrong"
            self.count("guests", outcome, f"hostile-sort {mode}", out + err)
        for seed in range(6):
            for policy in ["Fail", "Ignore"]:
                cfg = hostile_config("hostile-c", {"seed": seed, "mode": "garbage", "maxWaitMs": 20}, policy,
                                     sort=False, timeout="500ms", every_point=True)
                outcome, out, err = self.simulate(cfg, cluster)
                good = sum(1 for p, n in placements(out).items() if p.startswith("default/good-") and n)
                if outcome == "accepted" and good != 3:
                    outcome = "wrong"
                self.count("guests", outcome, f"hostile-c seed {seed} {policy}", out + err)

    # ---- hostile registries and https plugin servers ----

    def sources(self):
        component = (GUESTS / "priority-label.wasm").read_bytes()
        pin = hashlib.sha256(component).hexdigest()
        cert = self.certificate()
        env = {"KWS_PLUGIN_CACHE": str(self.work / "plugin-cache")}
        if cert:
            env["SSL_CERT_FILE"] = str(cert)
        # What a redirect must never reach: answers with a secret, and counts who asked.
        inner = Hostile(lambda req: (404, {}, b"SECRET-inner-metadata"))
        inner_tls = Hostile(lambda req: (200, {}, component), cert) if cert else None
        try:
            for name, behaviour, policy in registry_cases(inner, inner_tls):
                self.source_case("registry", name, behaviour, policy, component, None, env, inner)
            if cert:
                for name, behaviour, policy in https_cases(inner, inner_tls):
                    self.source_case("https", name, behaviour, policy, component, cert, env, inner, pin)
            else:
                self.problems.append("sources: openssl is missing: the https cases did not run")
        finally:
            inner.stop()
            if inner_tls:
                inner_tls.stop()

    def source_case(self, kind, name, behaviour, policy, component, cert, env, inner, pin=None):
        repo = f"kws-campaign/c{self.n}"
        artifact = Artifact(repo, component)
        server = Hostile(lambda req: behaviour(req, artifact), cert)
        inner_before = len(inner.seen)
        try:
            if kind == "registry":
                source, extra = f"oci://127.0.0.1:{server.port}/{repo}:v1", ""
            else:
                source, extra = f"https://127.0.0.1:{server.port}/{repo}/x.wasm", f"      sha256: {pin}\n"
            cfg = (f"{DEFAULT_CONFIG}profiles:\n- plugins:\n    multiPoint:\n      enabled: [{{name: L}}]\n"
                   f"  pluginConfig:\n  - name: L\n    args:\n      component: {source}\n{extra}"
                   f"      pullPolicy: Always\n      pullTimeout: 3s\n      failurePolicy: {policy}\n")
            start = time.monotonic()
            outcome, out, err = self.simulate(cfg, env=env)
            took = time.monotonic() - start
        finally:
            server.stop()
        what = f"{kind} {name} {policy}"
        wrong = []
        if took > 15:
            wrong.append(f"took {took:.1f}s with pullTimeout 3s")
        if "SECRET" in err:
            wrong.append("echoed a secret")
        if len(inner.seen) > inner_before:
            wrong.append(f"asked the server it was redirected to: {inner.seen[inner_before:]}")
        if "\x1b" in err or any(len(l) > 1000 for l in err.splitlines()):
            wrong.append("printed an escape or a line over 1000 characters")
        outside = [p for p in server.seen if not (p == "/v2/" or p.startswith(f"/v2/{repo}/") or
                                                    p.startswith(f"/{repo}/") or p.startswith("/token"))]
        if outside:
            wrong.append(f"asked outside the repository: {outside}")
        if outcome == "accepted" and policy == "Fail" and name not in ACCEPTED_SOURCES:
            outcome = "silent"
        if wrong and outcome not in ("panic", "hang"):
            outcome, err = "wrong", "; ".join(wrong) + ": " + err
        self.count("sources", outcome, what, err)

    def certificate(self):
        """A self-signed server certificate for 127.0.0.1 (openssl), or None when openssl is missing. Not a CA
        certificate: webpki refuses one as a server's own."""
        if not shutil.which("openssl"):
            return None
        key, crt = self.work / "tls.key", self.work / "tls.crt"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-keyout", key, "-out", crt, "-days", "2", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1", "-addext", "basicConstraints=critical,CA:FALSE",
                        "-addext", "extendedKeyUsage=serverAuth"], check=True, capture_output=True)
        return crt

    def table(self, silent_note):
        cols = ["clear", "accepted", "panic", "hang", "wrong", "silent", "unclear"]
        lines = ["| category | inputs | " + " | ".join(cols) + " |", "|---|---|" + "---|" * len(cols)]
        for cat, row in self.rows.items():
            total = sum(row.values())
            lines.append(f"| {cat} | {total} | " + " | ".join(str(row.get(c, 0)) for c in cols) + " |")
        return "\n".join(lines) + "\n" + silent_note


# ---- inputs ----

BASE_NODES = "".join(
    f"apiVersion: v1\nkind: Node\nmetadata:\n  name: node-{i}\n  labels: {{kubernetes.io/hostname: node-{i}}}\n"
    f"status:\n  allocatable: {{cpu: '8', memory: 16Gi, pods: '110'}}\n---\n" for i in range(3))
BASE_CLUSTER = BASE_NODES + "---\n".join(
    f"apiVersion: v1\nkind: Pod\nmetadata: {{name: good-{i}, namespace: default}}\n"
    f"spec:\n  containers: [{{name: c, image: i, resources: {{requests: {{cpu: 100m}}}}}}]\n" for i in range(3))
DEFAULT_CONFIG = f"apiVersion: {API}\nkind: {KIND}\n"


# ---- hostile servers ----

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
# Cases where a component is served after all (a redirect a registry may make): accepted is right.
ACCEPTED_SOURCES = {"redirect to its own storage"}


class Hostile:
    """An HTTP/1.1 server on a free 127.0.0.1 port (TLS with `cert`), one thread a connection, one request a
    connection. `behaviour(path)` answers (status, headers, body) or a callable that writes the answer itself."""

    def __init__(self, behaviour, cert=None):
        self.seen = []
        self.stopped = threading.Event()
        ctx = None
        if cert:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(cert, Path(cert).with_suffix(".key"))
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                sock = self.request
                sock.settimeout(10)
                try:
                    if ctx:
                        sock = ctx.wrap_socket(sock, server_side=True)
                    head = b""
                    while b"\r\n\r\n" not in head and len(head) < 65536:
                        chunk = sock.recv(4096)
                        if not chunk:
                            return
                        head += chunk
                    lines = head.split(b"\r\n")
                    method, path = (lines[0].decode(errors="replace").split() + ["", ""])[:2]
                    headers = {}
                    for l in lines[1:]:
                        k, _, v = l.decode(errors="replace").partition(":")
                        if k:
                            headers[k.strip().lower()] = v.strip()
                    outer.seen.append(path)
                    answer = behaviour(Req(method, path, headers))
                    if callable(answer):
                        answer(sock, outer.stopped)
                        return
                    status, extra, body = answer
                    out = f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
                    out += "".join(f"{k}: {v}\r\n" for k, v in extra.items()) + "\r\n"
                    sock.sendall(out.encode() + (b"" if method == "HEAD" else body))
                except (OSError, ssl.SSLError):
                    pass

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.stopped.set()
        self.server.shutdown()
        self.server.server_close()


class Req:
    def __init__(self, method, path, headers):
        self.method, self.path, self.headers = method, path, headers


class Artifact:
    """A registry's honest answers for one CNCF Wasm artifact at tag v1 (and a manifest that declares `digest` and
    `size` for its layer when given)."""

    def __init__(self, repo, blob, digest=None, size=None):
        self.repo, self.blob = repo, blob
        self.layer = digest or "sha256:" + hashlib.sha256(blob).hexdigest()
        self.manifest = json.dumps({
            "schemaVersion": 2, "mediaType": MANIFEST_TYPE,
            "config": {"mediaType": "application/vnd.wasm.config.v0+json",
                       "digest": "sha256:" + hashlib.sha256(b"{}").hexdigest(), "size": 2},
            "layers": [{"mediaType": "application/vnd.wasm.content.layer.v1+wasm", "digest": self.layer,
                        "size": len(blob) if size is None else size}],
        }).encode()
        self.manifest_digest = "sha256:" + hashlib.sha256(self.manifest).hexdigest()

    def is_manifest(self, req):
        return req.path.startswith(f"/v2/{self.repo}/manifests/")

    def is_blob(self, req):
        return req.path.startswith(f"/v2/{self.repo}/blobs/")

    def answer(self, req):
        if req.path == "/v2/":
            return 200, {}, b"{}"
        if self.is_manifest(req):
            return 200, {"Content-Type": MANIFEST_TYPE, "Docker-Content-Digest": self.manifest_digest}, self.manifest
        if req.path == f"/v2/{self.repo}/blobs/{self.layer}":
            return 200, {}, self.blob
        return 404, {}, b'{"errors":[{"code":"NOT_FOUND"}]}'


def trickle(declared, every=0.5):
    """Declares `declared` bytes and sends one every `every` seconds (for at most 60 s)."""
    def write(sock, stopped):
        sock.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {declared}\r\nConnection: close\r\n\r\n".encode())
        end = time.monotonic() + 60
        while time.monotonic() < end and not stopped.is_set():
            sock.sendall(b"x")
            time.sleep(every)
    return write


def flood(length, declared=None):
    """Sends `length` bytes as fast as they are taken (declaring `declared`, or no length)."""
    def write(sock, stopped):
        cl = f"Content-Length: {declared}\r\n" if declared is not None else ""
        sock.sendall(f"HTTP/1.1 200 OK\r\n{cl}Connection: close\r\n\r\n".encode())
        chunk, left = b" " * 65536, length
        while left > 0 and not stopped.is_set():
            sock.sendall(chunk[:min(left, len(chunk))])
            left -= len(chunk)
    return write


def silent(sock, stopped):
    """Takes the request and never answers."""
    stopped.wait(60)


NOISY = b'{"errors":[{"code":"DENIED"}]}\n\x1b[31mred\r\nFAKE-LOG-LINE level=error\n' + b"A" * (1 << 20)


def registry_cases(inner, inner_tls):
    """(name, behaviour(req, artifact), failurePolicy) for hostile registries."""
    secret = f"http://127.0.0.1:{inner.port}/latest/meta-data/"
    other_tls = f"https://127.0.0.1:{inner_tls.port}/x" if inner_tls else secret
    meta = "http://169.254.169.254/latest/meta-data/iam/security-credentials/"

    def on(which, answer):
        return lambda req, a: answer(req, a) if getattr(a, f"is_{which}")(req) else a.answer(req)

    def traversal(req, a):
        evil = Artifact(a.repo, a.blob, digest="sha256:../../../../../../../outside")
        return evil.answer(req)

    def lying_size(req, a):
        liar = Artifact(a.repo, b"x" * 5000)
        return flood(64 << 20) if liar.is_blob(req) else liar.answer(req)

    def bearer(realm):
        def answer(req, a):
            if req.headers.get("authorization") != "Bearer t":
                return 401, {"WWW-Authenticate": f'Bearer realm="{realm}",service="s"'}, b""
            return a.answer(req)
        return answer

    def own_storage(req, a):
        if a.is_blob(req):
            return 307, {"Location": f"http://{req.headers.get('host')}/{a.repo}/storage"}, b""
        if req.path == f"/{a.repo}/storage":
            return 200, {}, a.blob
        return a.answer(req)

    cases = []
    for policy in ["Fail", "Ignore"]:
        cases += [
            ("trickled manifest", on("manifest", lambda req, a: trickle(len(a.manifest))), policy),
            ("trickled blob", on("blob", lambda req, a: trickle(len(a.blob))), policy),
            ("no answer", lambda req, a: silent, policy),
        ]
    cases += [
        ("manifest of 64 MiB, no length", on("manifest", lambda req, a: flood(64 << 20)), "Fail"),
        ("manifest declaring 1.5 GB", on("manifest", lambda req, a: flood(8 << 20, declared=1_500_000_000)), "Fail"),
        ("blob declared 5000 bytes, sent 64 MiB", lying_size, "Fail"),
        ("blob with another digest", on("blob", lambda req, a: (200, {}, a.blob[:-1] + b"!")), "Fail"),
        ("manifest not JSON", on("manifest", lambda req, a: (200, {"Content-Type": MANIFEST_TYPE}, os.urandom(512))),
         "Fail"),
        ("layer digest with ../", traversal, "Fail"),
        ("manifest 302 to another loopback port", on("manifest", lambda req, a: (302, {"Location": secret}, b"")),
         "Fail"),
        ("blob 307 to another loopback port", on("blob", lambda req, a: (307, {"Location": secret}, b"")), "Fail"),
        ("blob 307 to https on loopback", on("blob", lambda req, a: (307, {"Location": other_tls}, b"")), "Fail"),
        ("blob 307 to link-local", on("blob", lambda req, a: (307, {"Location": meta}, b"")), "Fail"),
        ("redirect loop", on("manifest", lambda req, a: (302, {"Location": req.path}, b"")), "Fail"),
        ("redirect to its own storage", own_storage, "Fail"),
        ("404 with 1 MiB body, escapes", on("manifest", lambda req, a: (404, {}, NOISY)), "Fail"),
        ("500 with 1 MiB body, escapes", on("blob", lambda req, a: (500, {}, NOISY)), "Fail"),
        ("token realm link-local", bearer("http://169.254.169.254/token"), "Fail"),
        ("token realm on another loopback port", bearer(secret), "Fail"),
    ]
    return cases


def https_cases(inner, inner_tls):
    """(name, behaviour(req, artifact), failurePolicy) for hostile https plugin servers."""
    secret = f"http://127.0.0.1:{inner.port}/x.wasm"
    other_tls = f"https://127.0.0.1:{inner_tls.port}/x.wasm"
    cases = []
    for policy in ["Fail", "Ignore"]:
        cases += [
            ("trickled body", lambda req, a: trickle(len(a.blob)), policy),
            ("no answer", lambda req, a: silent, policy),
        ]
    cases += [
        ("body declaring 1.5 GB", lambda req, a: flood(8 << 20, declared=1_500_000_000), "Fail"),
        ("wrong bytes", lambda req, a: (200, {}, a.blob[:-1] + b"!"), "Fail"),
        ("302 to plain http", lambda req, a: (302, {"Location": secret}, b""), "Fail"),
        ("302 to another loopback port", lambda req, a: (302, {"Location": other_tls}, b""), "Fail"),
        ("302 to link-local", lambda req, a: (302, {"Location": "https://169.254.169.254/x.wasm"}, b""), "Fail"),
        ("redirect loop", lambda req, a: (302, {"Location": req.path}, b""), "Fail"),
        ("404 with 1 MiB body, escapes", lambda req, a: (404, {}, NOISY), "Fail"),
    ]
    return cases


def placements(out):
    """`simulate`'s table: pod -> node, or None while pending."""
    where = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and "/" in parts[0] and parts[0] != "POD":
            where[parts[0]] = None if parts[1] == "<none>" else parts[1]
    return where


def node_doc(name, cpu):
    return (f"apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels: {{kubernetes.io/hostname: {name}}}\n"
            f"status:\n  allocatable: {{cpu: '{cpu}', memory: 16Gi, pods: '110'}}\n")


def pod_doc(name, cpu, scheduler=None):
    s = f"\n  schedulerName: {scheduler}" if scheduler else ""
    return (f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec:{s}\n"
            f"  containers: [{{name: c, image: i, resources: {{requests: {{cpu: {json.dumps(cpu)}}}}}}}]\n")


def hostile_config(component, config, policy, sort, timeout="100ms", every_point=False):
    """Two profiles, `default-scheduler` and `hostile`, the hostile guest `component` in `hostile` (its Filter and
    Score), or as the QueueSort of both (`sort`), or at every point it exports (`every_point`: QueueSort in both
    profiles, as profiles must share it)."""
    args = ("  pluginConfig:\n  - name: H\n    args:\n"
            f"      component: {GUESTS / (component + '.wasm')}\n      config: {json.dumps(config)}\n"
            f"      timeout: {timeout}\n      memoryLimit: 32Mi\n      failurePolicy: {policy}\n")
    sort_only = "  plugins:\n    queueSort:\n      enabled: [{name: H}]\n      disabled: [{name: '*'}]\n"
    if sort:
        profiles = f"- schedulerName: default-scheduler\n{sort_only}{args}- schedulerName: hostile\n{sort_only}{args}"
    elif every_point:
        profiles = (f"- schedulerName: default-scheduler\n{sort_only}{args}- schedulerName: hostile\n"
                    f"{sort_only}    multiPoint:\n      enabled: [{{name: H}}]\n{args}")
    else:
        profiles = ("- schedulerName: default-scheduler\n- schedulerName: hostile\n"
                    f"  plugins:\n    multiPoint:\n      enabled: [{{name: H}}]\n{args}")
    return f"apiVersion: {API}\nkind: {KIND}\nprofiles:\n{profiles}"


def config_cases():
    """(name, text, valid): configurations upstream refuses, and a few odd valid ones."""
    head = f"apiVersion: {API}\nkind: {KIND}\n"
    label = GUESTS / "priority-label.wasm"
    wasm = lambda extra: (f"{head}profiles:\n- plugins:\n    multiPoint:\n      enabled: [{{name: L}}]\n"
                          f"  pluginConfig:\n  - name: L\n    args:\n      component: {label}\n{extra}")
    cases = [
        ("parallelism 0", head + "parallelism: 0\n", False),
        ("parallelism -1", head + "parallelism: -1\n", False),
        ("percentageOfNodesToScore 101", head + "percentageOfNodesToScore: 101\n", False),
        ("podInitialBackoffSeconds 0", head + "podInitialBackoffSeconds: 0\n", False),
        ("podMaxBackoff < initial", head + "podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 1\n", False),
        ("qps .inf", head + "clientConnection: {qps: .inf}\n", False),
        ("qps .nan", head + "clientConnection: {qps: .nan}\n", False),
        ("burst -1", head + "clientConnection: {burst: -1}\n", False),
        ("lease huge", head + "leaderElection: {leaseDuration: 99999999999999h}\n", False),
        ("renew huge", head + "leaderElection: {renewDeadline: 9999999999999999999h}\n", False),
        ("retry 0s", head + "leaderElection: {retryPeriod: 0s}\n", False),
        ("renew >= lease", head + "leaderElection: {leaseDuration: 10s, renewDeadline: 10s}\n", False),
        ("resourceLock endpoints", head + "leaderElection: {resourceLock: endpoints}\n", False),
        ("duplicate schedulerName", head + "profiles: [{schedulerName: a}, {schedulerName: a}]\n", False),
        ("empty schedulerName", head + "profiles: [{schedulerName: ''}]\n", False),
        ("unknown plugin", head + "profiles: [{plugins: {filter: {enabled: [{name: Nope}]}}}]\n", False),
        ("duplicate pluginConfig", head + "profiles: [{pluginConfig: [{name: NodeAffinity}, {name: NodeAffinity}]}]\n", False),
        ("fit type bogus", head + "profiles: [{pluginConfig: [{name: NodeResourcesFit, args: {scoringStrategy: {type: Bogus}}}]}]\n", False),
        ("fit weight -1", head + "profiles: [{pluginConfig: [{name: NodeResourcesFit, args: {scoringStrategy: {type: LeastAllocated, resources: [{name: cpu, weight: -1}]}}}]}]\n", False),
        ("fit weight 101", head + "profiles: [{pluginConfig: [{name: NodeResourcesFit, args: {scoringStrategy: {type: LeastAllocated, resources: [{name: cpu, weight: 101}]}}}]}]\n", False),
        ("fit weight 0 (means 1)", head + "profiles: [{pluginConfig: [{name: NodeResourcesFit, args: {scoringStrategy: {type: LeastAllocated, resources: [{name: cpu, weight: 0}]}}}]}]\n", True),
        ("shape unordered", head + "profiles: [{pluginConfig: [{name: NodeResourcesFit, args: {scoringStrategy: {type: RequestedToCapacityRatio, requestedToCapacityRatio: {shape: [{utilization: 50, score: 1}, {utilization: 10, score: 2}]}}}}]}]\n", False),
        ("hardPodAffinityWeight 101", head + "profiles: [{pluginConfig: [{name: InterPodAffinity, args: {hardPodAffinityWeight: 101}}]}]\n", False),
        ("spread maxSkew 0", head + "profiles: [{pluginConfig: [{name: PodTopologySpread, args: {defaultingType: List, defaultConstraints: [{maxSkew: 0, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]}}]}]\n", False),
        ("preemption percentage 101", head + "profiles: [{pluginConfig: [{name: DefaultPreemption, args: {minCandidateNodesPercentage: 101}}]}]\n", False),
        ("unknown field", head + "parallelismm: 4\n", False),
        ("unknown plugin args field", head + "profiles: [{pluginConfig: [{name: NodeAffinity, args: {addedAffinty: {}}}]}]\n", False),
        ("args a list", head + "profiles: [{pluginConfig: [{name: NodeResourcesFit, args: []}]}]\n", False),
        ("wasm timeout huge", wasm("      timeout: 1000000000000h\n"), False),
        ("wasm timeout 2m", wasm("      timeout: 2m\n"), False),
        ("wasm memoryLimit 1e400", wasm("      memoryLimit: 1e400\n"), False),
        ("wasm memoryLimit 5Gi", wasm("      memoryLimit: 5Gi\n"), False),
        ("wasm failurePolicy Maybe", wasm("      failurePolicy: Maybe\n"), False),
        ("wasm breaker backoff 0s", wasm("      circuitBreaker: {backoff: 0s}\n"), False),
        ("wasm sha256 wrong", wasm("      sha256: " + "0" * 64 + "\n"), False),
        ("wasm config refused", wasm("      config: {labelKey: 7}\n"), False),
        ("wasm config empty key", wasm("      config: {labelKey: ''}\n"), False),
        ("wasm component missing", wasm("").replace(str(label), "/nonexistent.wasm"), False),
        ("1001 profiles", head + "profiles:\n" + "".join(f"- schedulerName: s{i}\n" for i in range(1001)), False),
        ("100 KB of [", "[" * 100_000, False),
        ("100 KB of {", "{a: " * 25_000, False),
        ("two documents", head + "---\n" + head, False),
        ("empty", "", False),
        ("wrong apiVersion", head.replace("/v1", "/v1beta3"), False),
        ("wrong kind", head.replace(KIND, "Pod"), False),
        ("byte order mark", "\ufeff" + head, True),
        ("valid wasm", wasm(""), True),
        ("valid minimal", head, True),
    ]
    return cases


def cluster_cases():
    """(name, text, valid): cluster objects the API server refuses, and a few odd valid ones."""
    pod = lambda spec, meta="": (f"apiVersion: v1\nkind: Pod\nmetadata: {{name: p, namespace: default{meta}}}\n"
                                 f"spec:\n{spec}")
    c = "  containers: [{name: c, image: i}]\n"
    req = lambda q: f"  containers: [{{name: c, image: i, resources: {{requests: {{cpu: {json.dumps(q)}}}}}}}]\n"
    aff = lambda expr: (c + "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n"
                        f"        nodeSelectorTerms:\n        - matchExpressions: [{expr}]\n")
    pref = lambda w: (c + "  affinity:\n    nodeAffinity:\n      preferredDuringSchedulingIgnoredDuringExecution:\n"
                      f"      - weight: {w}\n        preference:\n          matchExpressions: [{{key: a, operator: Exists}}]\n")
    spread = lambda s: c + f"  topologySpreadConstraints: [{s}]\n"
    node = lambda alloc: (f"apiVersion: v1\nkind: Node\nmetadata: {{name: n}}\nstatus:\n  allocatable: {alloc}\n")
    pc = lambda name, extra: f"apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {{name: {name}}}\nvalue: 10\n{extra}"
    pdb = lambda spec: (f"apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: b, namespace: default}}\n"
                        f"spec:\n  selector: {{matchLabels: {{a: b}}}}\n{spec}")
    cases = [
        ("negative request", pod(req("-1")), False),
        ("negative overhead", pod(c + "  overhead: {cpu: '-1'}\n"), False),
        ("negative allocatable", node("{cpu: '-8'}"), False),
        ("negative capacity", "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus:\n  capacity: {memory: -1Gi}\n", False),
        ("bad quantity", pod(req("lots")), False),
        ("label key with space", pod(c, ", labels: {'a b': x}"), False),
        ("label value 64 chars", pod(c, ", labels: {a: " + "x" * 64 + "}"), False),
        ("name uppercase", pod(c).replace("name: p,", "name: P,"), False),
        ("name empty", pod(c).replace("name: p,", "name: '',"), False),
        ("operator Maybe", pod(aff("{key: a, operator: Maybe, values: [x]}")), False),
        ("In without values", pod(aff("{key: a, operator: In}")), False),
        ("Exists with values", pod(aff("{key: a, operator: Exists, values: [x]}")), False),
        ("Gt two values", pod(aff("{key: a, operator: Gt, values: ['1', '2']}")), False),
        ("Gt not integer (a valid label value; it matches nothing)", pod(aff("{key: a, operator: Gt, values: [x]}")), True),
        ("preferred weight 0", pod(pref(0)), False),
        ("preferred weight -5", pod(pref(-5)), False),
        ("preferred weight 101", pod(pref(101)), False),
        ("maxSkew 0", pod(spread("{maxSkew: 0, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}")), False),
        ("topologyKey empty", pod(spread("{maxSkew: 1, topologyKey: '', whenUnsatisfiable: DoNotSchedule}")), False),
        ("whenUnsatisfiable bogus", pod(spread("{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: Maybe}")), False),
        ("minDomains with ScheduleAnyway", pod(spread("{maxSkew: 1, minDomains: 2, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway}")), False),
        ("toleration operator bogus", pod(c + "  tolerations: [{key: a, operator: Maybe}]\n"), False),
        ("toleration effect bogus", pod(c + "  tolerations: [{key: a, operator: Exists, effect: Sometimes}]\n"), False),
        ("taint effect bogus", "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nspec:\n  taints: [{key: a, effect: Sometimes}]\n", False),
        ("hostPort 70000", pod("  containers: [{name: c, image: i, ports: [{containerPort: 80, hostPort: 70000}]}]\n"), False),
        ("containerPort 0", pod("  containers: [{name: c, image: i, ports: [{containerPort: 0}]}]\n"), False),
        ("container without name", pod("  containers: [{image: i}]\n"), False),
        ("duplicate container names", pod("  containers: [{name: c, image: i}, {name: c, image: j}]\n"), False),
        ("no containers", pod("  containers: []\n"), False),
        ("misspelled nodeSelecter", pod(c + "  nodeSelecter: {a: b}\n"), False),
        ("two globalDefault", pc("a", "globalDefault: true\n") + "---\n" + pc("b", "globalDefault: true\n"), False),
        ("PriorityClass value too high", pc("a", "").replace("value: 10", "value: 2000000000"), False),
        ("PDB both set", pdb("  minAvailable: 1\n  maxUnavailable: 1\n"), False),
        ("PDB negative", pdb("  minAvailable: -1\n"), False),
        ("PDB 150%", pdb("  maxUnavailable: 150%\n"), False),
        ("List items a string", "apiVersion: v1\nkind: List\nitems: nope\n", False),
        ("List in List", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: List\n  items: []\n", False),
        # A dump of a live cluster holds kinds the scheduler does not read: they are counted on stderr, not refused.
        ("unknown kind", "apiVersion: v1\nkind: Widget\nmetadata: {name: w}\n", True),
        ("100 KB of [", "[" * 100_000, False),
        ("5000 nested lists", "".join("  " * i + "-\n" for i in range(5000)), False),
        ("not UTF-8", b"apiVersion: v1\nkind: Pod\nmetadata: {name: \xff}\n", False),
        ("byte order mark", "\ufeff" + pod(c), True),
        ("huge exponent request", pod(req("1e2147483647")), True),
        ("valid pod", pod(c), True),
    ]
    return cases


VALUES = [None, True, False, 0, -1, 1, 2 ** 31, 2 ** 63, -(2 ** 63) - 1, 1e309, -1e309, float("nan"), 0.5, "", "x",
          "-1", "1e2147483647", "99999999999999999h", "1.5Gi", "\u00e9" * 70, [], {}, [[]], {"a": {"b": {}}}, "a" * 5000]


def mutate(doc, rng):
    """One random edit somewhere in a YAML document: drop, retype, duplicate or rename a field, or replace a
    scalar with an odd value."""
    paths = []

    def walk(node, path):
        paths.append(path)
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, path + [k])
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, path + [i])

    walk(doc, [])
    path = rng.choice(paths)
    if not path:
        return rng.choice(VALUES + ["[" * 200, "x: [", "\ufeff" + yaml.safe_dump(doc)])
    parent = doc
    for p in path[:-1]:
        parent = parent[p]
    key = path[-1]
    op = rng.choice(["drop", "value", "value", "rename", "dup"])
    if op == "drop":
        del parent[key]
    elif op == "value":
        parent[key] = copy.deepcopy(rng.choice(VALUES))
    elif op == "rename" and isinstance(parent, dict):
        parent[str(key) + rng.choice(["x", "s", "_"])] = parent.pop(key)
    elif isinstance(parent, list):
        parent.append(copy.deepcopy(parent[key]))
    else:
        parent[key] = [copy.deepcopy(parent[key])]
    return doc


SUFFIXES = ["", "m", "n", "u", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]


def random_quantity(rng):
    sign = rng.choice(["", "", "", "+", "-"])
    digits = str(rng.choice([0, 1, 7, 8, 9, 10, 100, 7999, 8000, 8001, rng.randrange(10 ** rng.randint(1, 25))]))
    if rng.random() < 0.4:
        frac = str(rng.randrange(10 ** rng.randint(1, 12))).rjust(rng.randint(1, 12), "0")
        digits = f"{digits}.{frac}"
    if rng.random() < 0.3:
        exp = rng.choice([0, 1, -1, 3, -3, 9, -9, 18, 100, -100, 2147483647, -2147483648, 4294967296])
        suffix = f"{rng.choice(['e', 'E'])}{exp}"
    else:
        suffix = rng.choice(SUFFIXES)
    if rng.random() < 0.05:
        return rng.choice(["", "1.2.3", "1e", "1Kb", "0x10", "1 k", "--1", "1e1.5", "Infinity"])
    return f"{sign}{digits}{suffix}"


def exact_milli(q):
    """The request in millicores, rounded up, as the scheduler must see it; None if `q` is not a quantity.
    Huge values are compared exactly (anything past the node fits nowhere)."""
    m = re.fullmatch(r"([+-]?)([0-9]*(?:\.[0-9]*)?)(.*)", q)
    if not m:
        return None
    sign, num, suffix = m.groups()
    if num in ("", "."):
        # upstream parses "-", "." and bare suffixes as 0; the campaign keeps to unambiguous inputs
        return None
    binary = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
    decimal = {"": 0, "n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
    v = Decimal(num)
    if suffix in binary:
        v = v * (Decimal(2) ** binary[suffix])
    elif suffix in decimal:
        v = v.scaleb(decimal[suffix])
    elif re.fullmatch(r"[eE][+-]?[0-9]+", suffix):
        e = int(suffix[1:])
        if e > 10 ** 6:
            return 10 ** 30 if sign != "-" else -(10 ** 30)
        if e < -(10 ** 6):
            v = Decimal(0) if v == 0 else Decimal("1e-100")
        else:
            v = v.scaleb(e)
    else:
        return None
    if sign == "-" and v != 0:
        return -1
    milli = (v * 1000).to_integral_value(rounding=ROUND_CEILING)
    return int(milli)



# ---- hostile HTTPS clients (self-contained: its own function and table) ----

# Short limits so each case takes seconds; the same code path as the defaults (handshake 10s, header 32s, idle 90s,
# 512 connections).
HTTPS_LIMITS = {"handshake": 2, "header": 3, "idle": 4, "connections": 64}


def _https_context(alpn=None):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if alpn:
        ctx.set_alpn_protocols(alpn)
    return ctx


def _healthz(port, timeout=5):
    """One GET /healthz on a fresh connection: the status code, or None."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as raw:
            with _https_context().wrap_socket(raw, server_hostname="localhost") as s:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                data = b""
                while True:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
        return int(data.split(b" ", 2)[1])
    except (OSError, ValueError, IndexError):
        return None


def _closed_by_peer(sock, within):
    """Whether the server closes `sock` (EOF or reset) within `within` seconds."""
    sock.settimeout(0.2)
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if sock.recv(4096) == b"":
                return True
        except (socket.timeout, ssl.SSLWantReadError):
            continue
        except (OSError, ssl.SSLError):
            return True
    return False


def _fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def hostile_https(binary, work):
    """Runs the live scheduler (no API server reachable: /healthz needs none) and the hostile cases against its port.
    Returns (table, problems)."""
    work = Path(work)
    kubeconfig = work / "https-kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\n"
        "users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"
        "current-context: x\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    limits = ",".join(f"{k}={v}s" if k != "connections" else f"{k}={v}" for k, v in HTTPS_LIMITS.items())
    log = open(work / "https-scheduler.log", "wb")
    proc = subprocess.Popen(
        [str(binary), "--kubeconfig", str(kubeconfig), "--bind-address", "127.0.0.1", "--secure-port", str(port),
         "--authentication-skip-lookup", "--leader-elect=false"],
        stdout=subprocess.DEVNULL, stderr=log, env={**os.environ, "KWS_SERVING_LIMITS": limits, "KWS_LOG": "warn"})
    rows, problems = [], []
    try:
        deadline = time.monotonic() + 60
        while _healthz(port, 2) != 200:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the scheduler did not serve /healthz (see {work / 'https-scheduler.log'})")
            time.sleep(0.2)
        baseline = _fds(proc.pid)
        cap = HTTPS_LIMITS["connections"]
        for name, case in [("slow handshake", _case_slow_handshake), ("slowloris header", _case_slowloris),
                           ("idle TLS past the cap", _case_idle_flood), ("huge headers", _case_huge_headers),
                           ("many HTTP/2 streams", _case_h2_streams)]:
            fds = [baseline]
            stop = threading.Event()

            def watch():
                while not stop.is_set():
                    fds.append(_fds(proc.pid))
                    time.sleep(0.1)
            watcher = threading.Thread(target=watch)
            watcher.start()
            try:
                n, cut, note, healthz_during = case(port)
            finally:
                stop.set()
                watcher.join()
            healthz_after = _healthz(port)
            max_fds = max(fds)
            clean = (healthz_during == 200 and healthz_after == 200 and proc.poll() is None
                     and max_fds <= baseline + cap + 16 and not note.startswith("!"))
            rows.append((name, n, cut, note.lstrip("!"), healthz_during, healthz_after, f"{baseline}->{max_fds}",
                         "clean" if clean else "PROBLEM"))
            if not clean:
                problems.append(f"hostile-https: {name}: {note.lstrip('!')}; /healthz {healthz_during}/{healthz_after}; "
                                f"fds {baseline}->{max_fds}")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
    lines = ["| hostile HTTPS case | connections | cut by the server | detail | /healthz during | after | fds | "
             "outcome |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| " + " | ".join(str(x) for x in r) + " |")
    return "\n".join(lines), problems


def _open(port, n, tls=True, alpn=None):
    socks = []
    for _ in range(n):
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        socks.append(_https_context(alpn).wrap_socket(raw, server_hostname="localhost") if tls else raw)
    return socks


def _count_closed(socks, within):
    start = time.monotonic()
    closed = 0
    for s in socks:
        if _closed_by_peer(s, max(0.0, within - (time.monotonic() - start))):
            closed += 1
        s.close()
    return closed


def _case_slow_handshake(port):
    """The first byte of a ClientHello, then nothing: cut at the handshake timeout."""
    socks = _open(port, 100, tls=False)
    for s in socks:
        s.sendall(b"\x16")
    during = _healthz(port)
    cut = _count_closed(socks, HTTPS_LIMITS["handshake"] + 3)
    return 100, cut, "" if cut == 100 else f"!{100 - cut} handshakes left open", during


def _case_slowloris(port):
    """A header line a second on 50 connections: cut at the header timeout."""
    socks = _open(port, 50)
    for s in socks:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n")
    alive = list(socks)
    during = None
    end = time.monotonic() + HTTPS_LIMITS["header"] + 4
    i = 0
    while time.monotonic() < end and alive:
        i += 1
        for s in list(alive):
            try:
                s.sendall(f"x-{i}: y\r\n".encode())
            except (OSError, ssl.SSLError):
                alive.remove(s)
        if during is None:
            during = _healthz(port)
        time.sleep(1)
    cut = _count_closed(socks, 1)
    return 50, cut, "" if cut == 50 else f"!{50 - cut} slow headers kept", during


def _case_idle_flood(port):
    """300 handshaken, silent TLS connections against a cap of 64: the oldest idle ones make room."""
    socks = _open(port, 300)
    during = _healthz(port)
    cut = _count_closed(socks, 2)
    cap = HTTPS_LIMITS["connections"]
    return 300, cut, "" if cut >= 300 - cap else f"!only {cut} closed past a cap of {cap}", during


def _case_huge_headers(port):
    """Requests with a 2 MiB header: refused (431 or closed), never buffered."""
    answers = []
    for _ in range(10):
        try:
            (s,) = _open(port, 1)
            s.settimeout(10)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nx-big: " + b"a" * (2 << 20) + b"\r\n\r\n")
            answers.append(s.recv(64).split(b" ", 2)[1].decode())
            s.close()
        except (OSError, ssl.SSLError, IndexError):
            answers.append("closed")
    during = _healthz(port)
    bad = [a for a in answers if a not in ("431", "closed")]
    return 10, len(answers) - len(bad), (f"!answered {bad}" if bad else ",".join(sorted(set(answers)))), during


def _case_h2_streams(port):
    """One HTTP/2 connection asking for 1,000 paths at once (curl multiplexes; the server allows 100 streams)."""
    urls = [f"https://127.0.0.1:{port}/healthz"] * 1000
    try:
        out = subprocess.run(["curl", "-sk", "--http2", "--parallel", "--parallel-max", "1000", "--max-time", "20",
                              "-o", "/dev/null", "-w", "\n%{http_code}\n", *urls],
                             capture_output=True, timeout=60).stdout.decode()
    except (OSError, subprocess.TimeoutExpired) as e:
        return 1, 0, f"!curl: {e}", None
    during = _healthz(port)
    # Bodies after the first URL's go to stdout too: the codes are the lines of three digits.
    codes = [line for line in out.splitlines() if re.fullmatch(r"\d{3}", line)]
    ok = codes.count("200")
    # curl opens connections before it learns the 100-stream limit; past the connection cap the ones with nothing
    # in flight yet are closed (000): that is the cap working, not a failure, as long as the server keeps answering.
    return 1, 0, f"{ok}/1000 answered 200, {codes.count('000')} cut", during


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_bin = Path(os.environ.get("CARGO_TARGET_DIR", Path.home() / ".cache/kube-wasm-scheduler/target")) / \
        "debug/kube-wasm-scheduler"
    ap.add_argument("--bin", default=os.environ.get("KWS_BIN", default_bin))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--random", type=int, default=150, help="random mutations per random category")
    ap.add_argument("--out", help="write the table here too")
    ap.add_argument("--only", help="run these categories only (comma-separated, e.g. sources,hostile-https)")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    with tempfile.TemporaryDirectory(prefix="kws-campaign-") as work:
        c = Campaign(a.bin, work)
        sections = [
            ("config-invalid", c.config_invalid),
            ("cluster-invalid", c.cluster_invalid),
            ("quantities", lambda: c.quantities(rng, a.random)),
            ("plugin-files", lambda: c.plugin_files(rng, a.random // 2)),
            ("guests", c.guests),
            ("sources", c.sources),
            ("config-random", lambda: c.config_random(rng, a.random)),
            ("cluster-random", lambda: c.cluster_random(rng, a.random)),
            ("hostile-https", None),
        ]
        only = set(a.only.split(",")) if a.only else None
        unknown = (only or set()) - {name for name, _ in sections}
        if unknown:
            ap.error(f"--only: unknown categories {sorted(unknown)}")
        https_table = ""
        for name, run in sections:
            if only is not None and name not in only:
                continue
            if run is not None:
                run()
            else:
                # Its own table: its outcomes are not a row of exits.
                https_table, https_problems = hostile_https(a.bin, work)
                c.problems.extend(https_problems)
    table = c.table("") + ("\n\n" + https_table if https_table else "")
    print(table)
    for p in c.problems:
        print(p)
    if a.out:
        Path(a.out).write_text(table + "\n" + "\n".join(c.problems) + "\n")
    sys.exit(1 if c.problems else 0)


if __name__ == "__main__":
    main()
