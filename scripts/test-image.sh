#!/usr/bin/env bash
# `make test-image`: the release image, built the way a user's registry receives it, pushed to the project's local
# registry, pulled back into fresh storage, and run from its own root filesystem against a real control plane:
# it must become ready, lead, and bind a pod.
#
# No container can be run on the machines this project tests on (crun cannot set RLIMIT_NPROC there), so this
# script does what the kubelet and the runtime would do, from what the API server holds after
# `kubectl apply -f deploy/manifests`: the Deployment's pod template gives the command, args, env, user and group,
# the volumes (the ConfigMap's files, emptyDirs) and their mount paths, the read-only root filesystem and the
# readiness probe; the ServiceAccount's token, the API server's CA and the namespace are placed where in-cluster
# configuration reads them (/var/run/secrets/kubernetes.io/serviceaccount), with KUBERNETES_SERVICE_HOST/PORT naming
# the API server (on loopback here, where a cluster has the `kubernetes` Service). The binary runs with
# `chroot --userspec=UID:GID` into the pulled image's root filesystem, made read-only, with no_new_privs.
# Everything runs in network, mount and UTS namespaces of its own (`unshare`): the scheduler serves on the
# manifests' port 10259 without meeting anything else on the machine, and every mount goes away with the test.
#
# Usage: scripts/test-image.sh                    (as root: chroot, mount and network namespaces)
# Environment:
#   KWS_BIN          the release binary (default: `cargo build --release --locked` builds it)
#   KWS_KEEP=1       keep the work directory (logs, the pulled image's storage) instead of removing it
# Needs: buildah (installed by scripts/setup-buildah.sh), the registry (scripts/build-registry.sh), kube-apiserver
# and etcd (scripts/build-kube.sh), kubectl, curl, unshare, setpriv.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
say() { echo "test-image: $*" >&2; }
die() { echo "test-image: FAIL: $*" >&2; exit 1; }
START=$SECONDS
step() { say "[$((SECONDS - START)) s] $*"; }

if [[ "${KWS_IMAGE_TEST_INSIDE:-}" != 1 ]]; then
  [[ "$(id -u)" == 0 ]] || die "run as root: the test chroots, mounts and makes namespaces"
  for c in kubectl curl unshare setpriv chroot ip; do command -v "$c" >/dev/null || die "$c is missing"; done
  # What needs the network or the machine's package managers happens before the network goes away.
  "$ROOT/scripts/setup-buildah.sh"
  "$ROOT/scripts/build-registry.sh" >/dev/null
  "$ROOT/scripts/build-kube.sh" >/dev/null
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/kube-wasm-scheduler/target}"
  if [[ -z "${KWS_BIN:-}" ]]; then
    step "cargo build --release --locked --bin kube-wasm-scheduler"
    (cd "$ROOT" && cargo build --release --locked --bin kube-wasm-scheduler)
    KWS_BIN="$CARGO_TARGET_DIR/release/kube-wasm-scheduler"
  fi
  export KWS_BIN
  step "the sample guests the image holds (scripts/build-guests.sh, componentized by the release binary)"
  mapfile -t guests < <(awk '$1 == "file" && $3 ~ /^guest:/ {sub(/^guest:/, "", $3); print $3}' "$ROOT/deploy/image.txt")
  "$ROOT/scripts/build-guests.sh" "${guests[@]}" >&2
  step "into network, mount and UTS namespaces of its own"
  exec unshare --net --mount --uts --fork env KWS_IMAGE_TEST_INSIDE=1 KWS_TEST_START="$START" "$0" "$@"
fi

START="${KWS_TEST_START:-$SECONDS}"
ip link set lo up
hostname kube-wasm-scheduler-image-test
W="$(mktemp -d "${TMPDIR:-/tmp}/kws-test-image.XXXXXX")"
CP="$W/control-plane"
export KUBECONFIG="$CP/kubeconfig"
REGISTRY_PID="" SCHED_PID="" PULLED="" CONTAINER=""
pulled() { buildah --root "$W/pulled/storage" --runroot "$W/pulled/run" --storage-driver vfs "$@"; }
built() { buildah --root "$W/built/storage" --runroot "$W/built/run" --storage-driver vfs "$@"; }
cleanup() {
  local rc=$?
  set +e
  if [[ -n "$SCHED_PID" ]] && kill -0 "$SCHED_PID" 2>/dev/null; then kill -KILL "$SCHED_PID"; wait "$SCHED_PID"; fi
  ((rc == 0)) || { say "scheduler log (last 40 lines):"; tail -n 40 "$W/scheduler.log" >&2 2>/dev/null; }
  umount -R "$W/rootfs" 2>/dev/null
  [[ -z "$CONTAINER" ]] || { pulled umount "$CONTAINER"; pulled rm "$CONTAINER"; } >/dev/null 2>&1
  [[ ! -d "$W/pulled" ]] || pulled rmi --all --force >/dev/null 2>&1
  [[ ! -d "$W/built" ]] || built rmi --all --force >/dev/null 2>&1
  [[ -z "$REGISTRY_PID" ]] || { kill "$REGISTRY_PID"; wait "$REGISTRY_PID"; } 2>/dev/null
  [[ ! -d "$CP" ]] || "$ROOT/scripts/control-plane.sh" down "$CP" 2>/dev/null
  if [[ "${KWS_KEEP:-}" == 1 ]]; then say "kept $W"; else rm -rf "$W"; fi
  ((rc == 0)) && say "[$((SECONDS - START)) s] PASS" || say "[$((SECONDS - START)) s] FAIL (exit $rc)"
}
trap cleanup EXIT

# Waits for a condition: `until_ok SECONDS WHAT COMMAND...` runs COMMAND every half second until it succeeds.
until_ok() {
  local deadline=$((SECONDS + $1)) what="$2"
  shift 2
  until "$@"; do
    ((SECONDS < deadline)) || die "$what: not within the time allowed"
    [[ -z "$SCHED_PID" ]] || kill -0 "$SCHED_PID" 2>/dev/null || die "$what: the scheduler exited"
    sleep 0.5
  done
}

# The control plane, and deploy/manifests applied to it.
step "control plane (etcd + kube-apiserver) on this namespace's loopback"
"$ROOT/scripts/control-plane.sh" up "$CP" >/dev/null
kubectl apply --server-side -f "$ROOT/deploy/manifests" >/dev/null
NS=kube-system DEPLOY=kube-wasm-scheduler
tmpl() { kubectl get deployment "$DEPLOY" -n "$NS" -o jsonpath="{.spec.template.spec$1}"; }
ctr() { tmpl ".containers[0]$1"; }
IMAGE="$(ctr .image)"
[[ "$IMAGE" =~ ^([^:/]+):([^:/]+)$ ]] || die "the Deployment's image $IMAGE is not NAME:TAG"
REPO="${BASH_REMATCH[1]}"
PORT_IN_POD="$(ctr '.ports[0].containerPort')"

# Built (buildah, from scratch: deploy/image.txt), pushed to the local registry, and the build's storage removed:
# what runs next comes from the registry.
step "scripts/build-image.sh --tag $IMAGE"
KWS_BUILDAH_ROOT="$W/built" "$ROOT/scripts/build-image.sh" --tag "$IMAGE" >/dev/null
mkdir -p "$W/registry/data"
REGISTRY_PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
REGISTRY="127.0.0.1:$REGISTRY_PORT"
cat >"$W/registry/config.yml" <<EOF
version: 0.1
log: {level: warn}
storage:
  filesystem: {rootdirectory: $W/registry/data}
http: {addr: $REGISTRY}
EOF
registry_bin="$("$ROOT/scripts/build-registry.sh" 2>/dev/null | tail -1)"
"$registry_bin" serve "$W/registry/config.yml" >"$W/registry/registry.log" 2>&1 &
REGISTRY_PID=$!
until_ok 20 "the registry answers /v2/" bash -c "[[ \$(curl -s -o /dev/null -w '%{http_code}' http://$REGISTRY/v2/) == 200 ]]"
step "buildah push $IMAGE to $REGISTRY/$REPO:${IMAGE#*:}"
built push --quiet --tls-verify=false --digestfile "$W/pushed.digest" "$IMAGE" "docker://$REGISTRY/$IMAGE"
PUSHED="$(cat "$W/pushed.digest")"
built rmi --all --force >/dev/null
rm -rf "$W/built"

step "buildah pull $REGISTRY/$IMAGE into fresh storage"
pulled pull --quiet --tls-verify=false "docker://$REGISTRY/$IMAGE" >/dev/null
PULLED="$REGISTRY/$IMAGE"
got="$(pulled images --digests --format '{{.Digest}}' "$PULLED")"
[[ "$got" == "$PUSHED" ]] || die "pulled $got, pushed $PUSHED"
cfg() { pulled inspect --type image --format "{{$1}}" "$PULLED"; }
[[ "$(cfg .OCIv1.Config.User)" == "$(tmpl .securityContext.runAsUser):$(tmpl .securityContext.runAsGroup)" ]] ||
  die "the image's user $(cfg .OCIv1.Config.User) is not the Deployment's"
[[ "$(cfg .OCIv1.Config.Entrypoint)" == "[$(ctr '.command[0]')]" ]] ||
  die "the image's entrypoint $(cfg .OCIv1.Config.Entrypoint) is not the Deployment's command"
[[ "$(cfg .OCIv1.Config.ExposedPorts)" == *"$PORT_IN_POD/tcp"* || "$(cfg .OCIv1.Config.ExposedPorts)" == *"[$PORT_IN_POD:"* ]] ||
  die "the image does not expose $PORT_IN_POD: $(cfg .OCIv1.Config.ExposedPorts)"

# Its root filesystem: what the image holds and nothing to run but the binary (no shell).
guests_in_image=()
CONTAINER="$(pulled from --quiet --pull-never --name kws-image-test "$PULLED")"
FS="$(pulled mount "$CONTAINER")"
step "the image's root filesystem ($(du -sh "$FS" | cut -f1)): $(cd "$FS" && find . -type f | wc -l) files"
while read -r kind path _; do
  [[ "$kind" == file ]] || continue
  [[ -f "$FS$path" ]] || die "the image lacks $path (deploy/image.txt)"
  [[ "$path" != *.wasm ]] || guests_in_image+=("$path")
done <"$ROOT/deploy/image.txt"
for sh in /bin/sh /bin/bash /usr/bin/sh /bin/busybox; do [[ ! -e "$FS$sh" ]] || die "the image holds a shell: $sh"; done
executables="$(cd "$FS" && find . -type f -perm -u+x | sed 's|^\.||' | grep -v -e '^/lib/' -e '^/lib64/' -e '^/usr/lib/' || true)"
[[ "$executables" == "$(ctr '.command[0]')" ]] || die "programs in the image other than the scheduler: $executables"

# What the kubelet and the runtime set up for the container, from the pod template.
step "the container as the Deployment's pod template describes it"
R="$W/rootfs"
mkdir -p "$R"
mount --bind "$FS" "$R"
mount --make-private "$R"
mkdir -p "$R/proc" "$R/dev"
mount -t proc proc "$R/proc"
mount -t tmpfs -o nosuid,mode=0755 tmpfs "$R/dev"
for d in null:1:3 zero:1:5 full:1:7 random:1:8 urandom:1:9 tty:5:0; do
  IFS=: read -r n major minor <<<"$d"
  mknod -m 0666 "$R/dev/$n" c "$major" "$minor"
done
while read -r name path ro; do
  [[ -n "$name" ]] || continue
  vol="$W/volumes/$name"
  mkdir -p "$vol"
  cm="$(tmpl ".volumes[?(@.name==\"$name\")].configMap.name")"
  if [[ -n "$cm" ]]; then
    for key in $(kubectl get configmap "$cm" -n "$NS" -o go-template='{{range $k, $v := .data}}{{$k}}{{"\n"}}{{end}}'); do
      kubectl get configmap "$cm" -n "$NS" -o go-template="{{index .data \"$key\"}}" >"$vol/$key"
      chmod 0644 "$vol/$key"
    done
  elif [[ -n "$(tmpl ".volumes[?(@.name==\"$name\")].emptyDir")" ]]; then
    chmod 0777 "$vol"
  else
    die "volume $name: only configMap and emptyDir volumes are set up here"
  fi
  mkdir -p "$R$path"
  mount --bind "$vol" "$R$path"
  [[ "$ro" != true ]] || mount -o remount,bind,ro "$R$path"
  say "  volume $name at $path${ro:+ (readOnly: $ro)}"
done < <(kubectl get deployment "$DEPLOY" -n "$NS" -o jsonpath='{range .spec.template.spec.containers[0].volumeMounts[*]}{.name} {.mountPath} {.readOnly}{"\n"}{end}')
# The ServiceAccount's projected token, the cluster's CA (here the API server's self-signed certificate, which the
# control plane's kubeconfig names) and the namespace.
SA="$(tmpl .serviceAccountName)"
ca="$(sed -n 's/^ *certificate-authority: //p' "$KUBECONFIG")"
[[ -s "$ca" ]] || die "the control plane's kubeconfig names no CA for in-cluster configuration to trust"
sa_dir="$W/volumes/serviceaccount"
mkdir -p "$sa_dir" "$R/var/run/secrets/kubernetes.io/serviceaccount"
kubectl create token "$SA" -n "$NS" >"$sa_dir/token"
cp "$ca" "$sa_dir/ca.crt"
printf '%s' "$NS" >"$sa_dir/namespace"
chmod 0644 "$sa_dir"/*
mount --bind "$sa_dir" "$R/var/run/secrets/kubernetes.io/serviceaccount"
mount -o remount,bind,ro "$R/var/run/secrets/kubernetes.io/serviceaccount"
if [[ "$(ctr .securityContext.readOnlyRootFilesystem)" == true ]]; then
  mount -o remount,bind,ro "$R"
  touch "$R/probe" 2>/dev/null && die "the root filesystem is writable"
fi

# The process: the Deployment's command and args, its env plus the image's and what the kubelet adds, as its user.
mapfile -t command < <(kubectl get deployment "$DEPLOY" -n "$NS" -o jsonpath='{range .spec.template.spec.containers[0].command[*]}{@}{"\n"}{end}')
mapfile -t args < <(kubectl get deployment "$DEPLOY" -n "$NS" -o jsonpath='{range .spec.template.spec.containers[0].args[*]}{@}{"\n"}{end}')
[[ -z "$(ctr '.env[*].valueFrom')" ]] || die "env valueFrom is not set up here"
mapfile -t env_pod < <(kubectl get deployment "$DEPLOY" -n "$NS" -o jsonpath='{range .spec.template.spec.containers[0].env[*]}{.name}={.value}{"\n"}{end}')
mapfile -t env_image < <(pulled inspect --type image --format '{{range .OCIv1.Config.Env}}{{.}}{{"\n"}}{{end}}' "$PULLED" | grep .)
UID_="$(tmpl .securityContext.runAsUser)" GID_="$(tmpl .securityContext.runAsGroup)"
home="$(awk -F: -v u="$UID_" '$3 == u {print $6}' "$R/etc/passwd")"
read -r _ _ api_port <"$CP/ports"
env_all=("${env_image[@]}" "HOSTNAME=$(hostname)" "HOME=${home:-/}" "KUBERNETES_SERVICE_HOST=127.0.0.1"
  "KUBERNETES_SERVICE_PORT=$api_port" "KUBERNETES_SERVICE_PORT_HTTPS=$api_port" "${env_pod[@]}")
nnp=()
[[ "$(ctr .securityContext.allowPrivilegeEscalation)" != false ]] || nnp=(setpriv --no-new-privs)
say "  run as $UID_:$GID_: ${command[*]} ${args[*]}"
say "  env: ${env_all[*]}"

# A node, and the pod the scheduler is to bind: for the ConfigMap's schedulerName.
kubectl create -f - >/dev/null <<EOF
{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}}
EOF
kubectl patch node node-1 --subresource=status --type=merge \
  -p '{"status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}}' >/dev/null
sched_name="$(awk '$1 == "-" && $2 == "schedulerName:" {print $3} $1 == "schedulerName:" {print $2}' "$W/volumes/config/config.yaml" | head -1)"
[[ -n "$sched_name" ]] || die "no schedulerName in the ConfigMap's configuration"

step "start the scheduler from the image's root filesystem"
env -i "${env_all[@]}" "${nnp[@]}" chroot --userspec="$UID_:$GID_" --groups="$GID_" "$R" "${command[@]}" "${args[@]}" \
  </dev/null >"$W/scheduler.log" 2>&1 &
SCHED_PID=$!

probe() { # PROBE-FIELD: does the container's probe answer 200, as the kubelet asks it (HTTPS, no credentials)?
  local path port scheme
  path="$(ctr ".$1.httpGet.path")" port="$(ctr ".$1.httpGet.port")" scheme="$(ctr ".$1.httpGet.scheme")"
  [[ "$(curl -sk -o /dev/null -w '%{http_code}' --max-time 5 "${scheme,,}://127.0.0.1:$port$path")" == 200 ]]
}
until_ok 120 "the readiness probe ($(ctr .readinessProbe.httpGet.path))" probe readinessProbe
step "ready: the readiness probe answers 200"
probe livenessProbe || die "the liveness probe does not answer 200"
until_ok 120 "/readyz (the leader)" bash -c "[[ \$(curl -sk -o /dev/null -w '%{http_code}' --max-time 5 https://127.0.0.1:$PORT_IN_POD/readyz) == 200 ]]"
step "leading: /readyz answers 200"
uid_seen="$(awk '/^Uid:/ {print $2 ":" $3}' "/proc/$SCHED_PID/status")"
[[ "$uid_seen" == "$UID_:$UID_" ]] || die "the scheduler runs as uid $uid_seen"
[[ "$(readlink "/proc/$SCHED_PID/root")" == "$R" ]] || die "the scheduler does not run in the image's root filesystem"
[[ "$(readlink "/proc/$SCHED_PID/exe")" == *"$(ctr '.command[0]')" ]] || die "the process is $(readlink "/proc/$SCHED_PID/exe")"

kubectl run web --image=registry.k8s.io/pause:3.10 \
  --overrides="{\"apiVersion\": \"v1\", \"spec\": {\"schedulerName\": \"$sched_name\"}}" >/dev/null
kubectl wait --for=jsonpath='{.spec.nodeName}'=node-1 pod/web --timeout=120s >/dev/null ||
  die "pod web was not bound to node-1"
step "bound: default/web on node-1 (schedulerName $sched_name)"
scheduled_event() {
  [[ "$(kubectl get events -n default --field-selector reason=Scheduled,involvedObject.name=web -o jsonpath='{.items[*].message}')" == \
    "Successfully assigned default/web to node-1" ]]
}
until_ok 60 "the Scheduled event" scheduled_event
grep -q 'became leader' "$W/scheduler.log" || die "no 'became leader' in the log"
# Every guest the image holds was compiled: the ConfigMap's plugins came from /plugins in the image.
compiled="$(grep -c 'component compiled' "$W/scheduler.log" || true)"
((compiled == ${#guests_in_image[@]})) || die "$compiled components compiled, the image holds ${#guests_in_image[@]} guests"
! grep -qi 'forbidden' "$W/scheduler.log" || die "a request was refused (RBAC)"

kill -TERM "$SCHED_PID"
rc=0
wait "$SCHED_PID" || rc=$?
SCHED_PID=""
((rc == 0)) || die "SIGTERM: exit $rc"
grep -q 'lease released' "$W/scheduler.log" || die "the Lease was not released on the way out"
step "SIGTERM: exit 0, lease released"
