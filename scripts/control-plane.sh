#!/usr/bin/env bash
# A real, throwaway Kubernetes control plane (etcd + kube-apiserver, no kubelet, no controllers) on loopback,
# for trying the scheduler against a real API server and for integration tests.
#
# Usage:
#   scripts/control-plane.sh up DIR            build/install what is missing (scripts/build-kube.sh), start etcd
#                                              and kube-apiserver, wait for /readyz, write DIR/kubeconfig
#   scripts/control-plane.sh down DIR [--purge] stop both (SIGTERM, SIGKILL after 10 s); --purge also deletes DIR
#   scripts/control-plane.sh env DIR           print `export KUBECONFIG=DIR/kubeconfig`
#   scripts/control-plane.sh status DIR        exit 0 when both processes run and /readyz answers ok
#   scripts/control-plane.sh kill-apiserver DIR  SIGKILL kube-apiserver only (a crash, for fault tests); etcd keeps
#                                              running, and `up` starts both again on the same data and ports
#
# DIR holds everything: etcd/ (data), certs/ (serving certs, service-account key), token.csv (admin token,
# user `admin` in group system:masters), kubeconfig, ports, pids (and etcd.pid, kube-apiserver.pid), etcd.log,
# kube-apiserver.log.
# Every server binds to 127.0.0.1 on free ports; `up` again on a stopped DIR reuses its data (and ports when free).
# KWS_APISERVER_FLAGS: more kube-apiserver flags, split on spaces, e.g. the Workload API's
#   KWS_APISERVER_FLAGS="--feature-gates=GenericWorkload=true --runtime-config=scheduling.k8s.io/v1beta1=true"
# kept in DIR/apiserver-flags, so a later `up` of the same DIR (a restart) passes them again.
# Nodes need no kubelet: Node objects created through the API are enough for scheduling. The API server runs with
# the admission plugin TaintNodesByCondition off: it would taint every new Node node.kubernetes.io/not-ready:NoSchedule
# until a kubelet reports Ready, and no kubelet or node-lifecycle controller runs here to lift it. Nor does it keep the
# `kubernetes` Service's endpoints (--endpoint-reconciler-type none): from v1.37 the API server refuses a loopback
# advertise address with the default reconciler, and nothing here reaches the API server through that Service.
set -euo pipefail

SCRIPTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
READY_TIMEOUT="${READY_TIMEOUT:-120}"

say() { echo "control-plane: $*" >&2; }
die() { echo "control-plane: error: $*" >&2; exit 1; }
usage() { sed -n '5,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

(($# >= 2)) || usage
CMD="$1"
DIR="$2"
shift 2
[[ -n "$DIR" ]] || usage

abs_dir() { mkdir -p "$1" && (cd "$1" && pwd); }

alive() {  # <pid> <string its command line must contain>: is it our process and running?
  local pid="$1" marker="$2"
  [[ "$pid" =~ ^[0-9]+$ ]] && [[ -r "/proc/$pid/cmdline" ]] || return 1
  [[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]] || return 1
  { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -qF -- "$marker"
}

# Reads DIR/pids ("<name> <pid>" lines) into ETCD_PID / APISERVER_PID.
read_pids() {
  ETCD_PID=""
  APISERVER_PID=""
  [[ -f "$DIR/pids" ]] || return 0
  local name pid
  while read -r name pid; do
    case "$name" in
      etcd) ETCD_PID="$pid" ;;
      kube-apiserver) APISERVER_PID="$pid" ;;
    esac
  done <"$DIR/pids"
}
etcd_alive() { [[ -n "$ETCD_PID" ]] && alive "$ETCD_PID" "$DIR/etcd"; }
apiserver_alive() { [[ -n "$APISERVER_PID" ]] && alive "$APISERVER_PID" "$DIR/certs"; }

gone_within() {  # <pid> <marker> <tenths of a second>: wait until the process is gone; false if it is not
  local i
  for ((i = 0; i < $3; i++)); do
    alive "$1" "$2" || return 0
    sleep 0.1
  done
  ! alive "$1" "$2"
}

stop_one() {  # <name> <pid> <marker>
  local name="$1" pid="$2" marker="$3"
  alive "$pid" "$marker" || return 0
  say "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  gone_within "$pid" "$marker" 100 && return 0
  say "$name did not stop within 10 s, sending SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  gone_within "$pid" "$marker" 50 && return 0
  say "warning: $name (pid $pid) is still there"
}

port_free() {  # nothing listening on 127.0.0.1:<port>?
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

free_ports() {  # <n>: print n distinct free loopback ports
  local n="$1"
  if command -v python3 >/dev/null 2>&1; then
    python3 -c '
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
' "$n" && return 0
  fi
  local out=() p
  while ((${#out[@]} < n)); do
    p=$((20000 + RANDOM % 30000))
    [[ " ${out[*]} " == *" $p "* ]] && continue
    port_free "$p" && out+=("$p")
  done
  echo "${out[*]}"
}

# Starts a server in the background, in its own session when setsid exists (so it outlives the caller: make,
# a terminal, a test harness), with output to DIR/<name>.log, and prints its pid. The pid is the one the server
# itself runs under, written by the server's own shell just before exec: `$!` would name setsid's parent when
# setsid forks, and a check right after `&` can run before the exec and see the wrong command line.
start_server() {  # <name> <command...>
  local name="$1" pidfile="$DIR/$1.pid" i
  shift
  rm -f "$pidfile" "$pidfile.tmp"
  local -a session=()
  command -v setsid >/dev/null && session=(setsid)
  nohup "${session[@]}" bash -c 'echo $$ >"$1.tmp" && mv "$1.tmp" "$1" && shift && exec "$@"' start "$pidfile" "$@" \
    </dev/null >"$DIR/$name.log" 2>&1 &
  for ((i = 0; i < 100; i++)); do
    [[ -s "$pidfile" ]] && { cat "$pidfile"; return 0; }
    sleep 0.1
  done
  die "$name did not start within 10 s; see $DIR/$name.log"
}

readyz() {  # <port> <token> [curl args...]: does /readyz answer ok?
  local port="$1" token="$2"
  shift 2
  [[ "$(curl -s --max-time 5 "$@" -H "Authorization: Bearer $token" "https://127.0.0.1:$port/readyz" 2>/dev/null)" == ok ]]
}

cmd_up() {
  DIR="$(abs_dir "$DIR")"
  read_pids
  if etcd_alive && apiserver_alive; then
    say "already running in $DIR (etcd pid $ETCD_PID, kube-apiserver pid $APISERVER_PID)"
    echo "export KUBECONFIG=$DIR/kubeconfig"
    return 0
  fi
  # Half-running from an earlier failure: start clean.
  [[ -z "$APISERVER_PID" ]] || stop_one kube-apiserver "$APISERVER_PID" "$DIR/certs"
  [[ -z "$ETCD_PID" ]] || stop_one etcd "$ETCD_PID" "$DIR/etcd"
  rm -f "$DIR/pids"

  local bindir
  bindir="$("$SCRIPTS/build-kube.sh" | tail -1)"
  local apiserver="$bindir/kube-apiserver"
  [[ -x "$apiserver" ]] || die "build-kube.sh did not produce $apiserver"
  local etcd="${ETCD:-$(command -v etcd || true)}"
  [[ -x "$etcd" ]] || die "no etcd binary (build-kube.sh should have installed one)"
  command -v openssl >/dev/null || die "openssl is needed to generate the service-account key"
  command -v curl >/dev/null || die "curl is needed to wait for the API server"

  # Ports: reuse the previous ones when all are still free (stable kubeconfig across down/up).
  local etcd_port="" peer_port="" api_port=""
  if [[ -f "$DIR/ports" ]]; then
    read -r etcd_port peer_port api_port <"$DIR/ports" || true
    if ! { [[ -n "$api_port" ]] && port_free "$etcd_port" && port_free "$peer_port" && port_free "$api_port"; }; then
      etcd_port=""
    fi
  fi
  if [[ -z "$etcd_port" ]]; then
    read -r etcd_port peer_port api_port < <(free_ports 3)
  fi
  echo "$etcd_port $peer_port $api_port" >"$DIR/ports"
  say "ports: etcd client $etcd_port, etcd peer $peer_port, kube-apiserver $api_port (127.0.0.1)"

  # Credentials: admin token and service-account signing key, kept across restarts.
  mkdir -p "$DIR/certs"
  chmod 700 "$DIR/certs"
  if [[ ! -s "$DIR/token.csv" ]]; then
    (umask 077 && echo "$(openssl rand -hex 32),admin,admin,\"system:masters\"" >"$DIR/token.csv")
  fi
  local token
  token="$(cut -d, -f1 "$DIR/token.csv")"
  if [[ ! -s "$DIR/certs/service-account.key" ]]; then
    say "generating the service-account signing key"
    (umask 077 && openssl genrsa -out "$DIR/certs/service-account.key" 2048 2>/dev/null)
    openssl rsa -in "$DIR/certs/service-account.key" -pubout -out "$DIR/certs/service-account.pub" 2>/dev/null
  fi


  say "starting etcd ($("$etcd" --version 2>/dev/null | head -1)), log $DIR/etcd.log"
  ETCD_PID="$(start_server etcd "$etcd" \
    --name control-plane \
    --data-dir "$DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" \
    --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "control-plane=http://127.0.0.1:$peer_port" \
    --initial-cluster-state new \
    --logger zap --log-outputs stderr)"
  echo "etcd $ETCD_PID" >"$DIR/pids"

  local i
  for ((i = 0; i < 300; i++)); do
    etcd_alive || { tail -n 20 "$DIR/etcd.log" >&2; die "etcd exited; see $DIR/etcd.log"; }
    curl -s --max-time 2 "http://127.0.0.1:$etcd_port/health" 2>/dev/null | grep -q '"health":"true"' && break
    sleep 0.1
  done
  ((i < 300)) || { stop_one etcd "$ETCD_PID" "$DIR/etcd"; die "etcd not healthy after 30 s; see $DIR/etcd.log"; }
  say "etcd healthy (pid $ETCD_PID)"

  local -a extra=()
  if [[ -n "${KWS_APISERVER_FLAGS:-}" ]]; then
    echo "$KWS_APISERVER_FLAGS" >"$DIR/apiserver-flags"
  fi
  if [[ -s "$DIR/apiserver-flags" ]]; then
    read -r -a extra <"$DIR/apiserver-flags"
    say "extra kube-apiserver flags: ${extra[*]}"
  fi
  say "starting kube-apiserver ($("$apiserver" --version 2>/dev/null)), log $DIR/kube-apiserver.log"
  APISERVER_PID="$(start_server kube-apiserver "$apiserver" \
    --etcd-servers "http://127.0.0.1:$etcd_port" \
    --cert-dir "$DIR/certs" \
    --secure-port "$api_port" \
    --bind-address 127.0.0.1 \
    --advertise-address 127.0.0.1 \
    --endpoint-reconciler-type none \
    --service-cluster-ip-range 10.0.0.0/24 \
    --allow-privileged=true \
    --disable-admission-plugins ServiceAccount,TaintNodesByCondition \
    --authorization-mode RBAC \
    --token-auth-file "$DIR/token.csv" \
    --service-account-issuer "https://127.0.0.1:$api_port" \
    --service-account-key-file "$DIR/certs/service-account.pub" \
    --service-account-signing-key-file "$DIR/certs/service-account.key" \
    ${extra[@]+"${extra[@]}"})"
  echo "kube-apiserver $APISERVER_PID" >>"$DIR/pids"

  local deadline=$((SECONDS + READY_TIMEOUT))
  until readyz "$api_port" "$token" -k; do
    if ! apiserver_alive; then
      tail -n 30 "$DIR/kube-apiserver.log" >&2
      stop_one etcd "$ETCD_PID" "$DIR/etcd"
      die "kube-apiserver exited; see $DIR/kube-apiserver.log"
    fi
    if ((SECONDS >= deadline)); then
      tail -n 30 "$DIR/kube-apiserver.log" >&2
      stop_one kube-apiserver "$APISERVER_PID" "$DIR/certs"
      stop_one etcd "$ETCD_PID" "$DIR/etcd"
      die "kube-apiserver not ready after $READY_TIMEOUT s; see $DIR/kube-apiserver.log"
    fi
    sleep 0.5
  done
  say "kube-apiserver ready (pid $APISERVER_PID) at https://127.0.0.1:$api_port"

  # Trust the API server's self-signed serving certificate when it verifies (it carries its CA); otherwise
  # fall back to skipping verification, which is acceptable for a loopback-only throwaway server.
  local tls_line="    insecure-skip-tls-verify: true"
  if [[ -s "$DIR/certs/apiserver.crt" ]] && readyz "$api_port" "$token" --cacert "$DIR/certs/apiserver.crt"; then
    tls_line="    certificate-authority: $DIR/certs/apiserver.crt"
  fi
  (umask 077 && cat >"$DIR/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: control-plane
  cluster:
    server: https://127.0.0.1:$api_port
$tls_line
users:
- name: admin
  user:
    token: $token
contexts:
- name: control-plane
  context:
    cluster: control-plane
    user: admin
    namespace: default
current-context: control-plane
EOF
  )
  say "wrote $DIR/kubeconfig (user admin, group system:masters)"
  echo "export KUBECONFIG=$DIR/kubeconfig"
}

cmd_down() {
  local purge=0 arg
  for arg in "$@"; do
    case "$arg" in
      --purge) purge=1 ;;
      *) die "unknown argument to down: $arg" ;;
    esac
  done
  [[ -d "$DIR" ]] || { say "nothing to stop: $DIR does not exist"; return 0; }
  DIR="$(cd "$DIR" && pwd)"
  read_pids
  if [[ -z "$ETCD_PID$APISERVER_PID" ]]; then
    say "nothing recorded in $DIR/pids"
  fi
  [[ -z "$APISERVER_PID" ]] || stop_one kube-apiserver "$APISERVER_PID" "$DIR/certs"
  [[ -z "$ETCD_PID" ]] || stop_one etcd "$ETCD_PID" "$DIR/etcd"
  rm -f "$DIR/pids"
  if ((purge)); then
    # Only delete what looks like a control-plane directory.
    [[ -f "$DIR/ports" || -d "$DIR/etcd" ]] || die "refusing to delete $DIR: not a control-plane directory"
    rm -rf -- "$DIR"
    say "deleted $DIR"
  else
    say "stopped; data kept in $DIR"
  fi
}

cmd_status() {
  [[ -d "$DIR" ]] || die "$DIR does not exist"
  DIR="$(cd "$DIR" && pwd)"
  read_pids
  local ok=0 api_port token
  if etcd_alive; then say "etcd running (pid $ETCD_PID)"; else say "etcd not running"; ok=1; fi
  if apiserver_alive; then say "kube-apiserver running (pid $APISERVER_PID)"; else say "kube-apiserver not running"; ok=1; fi
  if ((ok == 0)); then
    read -r _ _ api_port <"$DIR/ports"
    token="$(cut -d, -f1 "$DIR/token.csv")"
    if readyz "$api_port" "$token" -k; then say "/readyz ok at https://127.0.0.1:$api_port"; else say "/readyz not ok"; ok=1; fi
  fi
  return "$ok"
}

case "$CMD" in
  up) (($# == 0)) || usage; cmd_up ;;
  down) cmd_down "$@" ;;
  env)
    [[ -d "$DIR" ]] || die "$DIR does not exist"
    DIR="$(cd "$DIR" && pwd)"
    [[ -f "$DIR/kubeconfig" ]] || die "no $DIR/kubeconfig; run: $0 up $DIR"
    echo "export KUBECONFIG=$DIR/kubeconfig"
    ;;
  status) cmd_status ;;
  kill-apiserver)
    [[ -d "$DIR" ]] || die "$DIR does not exist"
    DIR="$(cd "$DIR" && pwd)"
    read_pids
    apiserver_alive || die "kube-apiserver is not running in $DIR"
    say "killing kube-apiserver (pid $APISERVER_PID) with SIGKILL"
    kill -KILL "$APISERVER_PID"
    gone_within "$APISERVER_PID" "$DIR/certs" 50 || die "kube-apiserver (pid $APISERVER_PID) is still there"
    ;;
  *) usage ;;
esac
