#!/usr/bin/env python3
"""Writes the tenant policy CRDs (SchedulingPolicy, ClusterSchedulingPolicy) to deploy/manifests/crds.yaml and the
chart's files/crds.yaml: one schema, two kinds (the cluster kind adds namespaceSelector and PostFilter)."""
import pathlib
import yaml
GROUP = "scheduling.kube-wasm-scheduler.io"
POINTS_NS = ["PreEnqueue", "PreFilter", "Filter", "PreScore", "Score", "Reserve", "Permit", "PreBind", "PostBind"]
POINTS_CL = ["PreEnqueue", "PreFilter", "Filter", "PostFilter", "PreScore", "Score", "Reserve", "Permit", "PreBind", "PostBind"]
DUR = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"

def selector(desc):
    req = {"type": "object", "required": ["key", "operator"], "properties": {
        "key": {"type": "string", "maxLength": 317},
        "operator": {"type": "string", "enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
        "values": {"type": "array", "maxItems": 64, "items": {"type": "string", "maxLength": 63}, "x-kubernetes-list-type": "atomic"}},
        "x-kubernetes-validations": [
            {"rule": "self.operator in ['In', 'NotIn'] ? has(self.values) && size(self.values) > 0 : !has(self.values) || size(self.values) == 0",
             "message": "values must be non-empty for In and NotIn, and empty for Exists and DoesNotExist"}]}
    return {"type": "object", "description": desc, "x-kubernetes-map-type": "atomic", "properties": {
        "matchLabels": {"type": "object", "maxProperties": 64, "additionalProperties": {"type": "string", "maxLength": 63}},
        "matchExpressions": {"type": "array", "maxItems": 32, "items": req, "x-kubernetes-list-type": "atomic"}}}

def spec(cluster):
    points = POINTS_CL if cluster else POINTS_NS
    props = {
        "schedulerName": {"type": "string", "minLength": 1, "maxLength": 253,
            "description": "The scheduler profile (its schedulerName) this policy attaches to; pods of other profiles never see it."},
        "component": {"type": "string", "minLength": 1, "maxLength": 2048,
            "description": "The WebAssembly component: oci://registry/repository:tag or @sha256:digest, or https://... with sha256. Files on the scheduler's disk are not accepted."},
        "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$",
            "description": "The component's SHA-256 (lowercase hex): required for https, optional for oci (then the pulled bytes must match)."},
        "pullPolicy": {"type": "string", "enum": ["Always", "IfNotPresent"],
            "description": "How an OCI tag is pulled: IfNotPresent (default for a digest) or Always (re-checked, default for a tag)."},
        "config": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
            "description": "The guest's own configuration, passed to it as JSON (host.config)."},
        "points": {"type": "array", "minItems": 1, "maxItems": len(points), "x-kubernetes-list-type": "set",
            "items": {"type": "string", "enum": points},
            "description": "The extension points the policy serves; the component must export each. The platform's limits may allow fewer." + ("" if cluster else " Never QueueSort, PostFilter or Bind: those act on other pods.")},
        "weight": {"type": "integer", "format": "int32", "minimum": 1, "maximum": 100,
            "description": "The Score weight (Score only, default 1); the platform caps it."},
        "timeout": {"type": "string", "maxLength": 32, "pattern": DUR,
            "description": "Deadline of one call (a Go duration, default 100ms); the platform caps it."},
        "memoryLimit": {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True,
            "description": "Memory cap of one instance (a quantity, default 64Mi); the platform caps it."},
        "failurePolicy": {"type": "string", "enum": ["Fail", "Ignore"],
            "description": "What a trap, timeout, bad answer or exhausted budget does to this policy's pods: Fail (the attempt fails) or Ignore (the policy sits the call out). Default Fail."},
        "podSelector": selector("Which pods the policy applies to (all of " + ("the selected namespaces'" if cluster else "its namespace's") + " pods when empty or absent)."),
    }
    if cluster:
        props["namespaceSelector"] = selector("Which namespaces' pods the policy applies to (every namespace when empty or absent).")
    rules = [
        {"rule": "self.component.startsWith('oci://') || self.component.startsWith('https://')",
         "fieldPath": ".component", "reason": "FieldValueInvalid",
         "message": "must start with oci:// or https:// (a file on the scheduler's disk is not a tenant's to name)"},
        {"rule": "!self.component.startsWith('https://') || has(self.sha256)",
         "fieldPath": ".sha256", "reason": "FieldValueRequired",
         "message": "required for an https:// component"},
        {"rule": "!has(self.weight) || 'Score' in self.points",
         "fieldPath": ".weight", "reason": "FieldValueForbidden",
         "message": "is only for a policy that serves Score"},
        {"rule": "!has(self.memoryLimit) || (isQuantity(string(self.memoryLimit)) && quantity(string(self.memoryLimit)).compareTo(quantity('1Mi')) >= 0 && quantity(string(self.memoryLimit)).compareTo(quantity('4Gi')) <= 0)",
         "fieldPath": ".memoryLimit", "reason": "FieldValueInvalid",
         "message": "must be a quantity between 1Mi and 4Gi"},
    ]
    return {"type": "object", "required": ["schedulerName", "component", "points"], "properties": props,
            "x-kubernetes-validations": rules}

STATUS = {"type": "object", "description": "Written by the scheduler.", "properties": {
    "observedGeneration": {"type": "integer", "format": "int64", "description": "The generation the scheduler last acted on."},
    "digest": {"type": "string", "description": "The sha256 digest of the component serving now."},
    "points": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "atomic", "description": "The points it serves now."},
    "conditions": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
        "description": "Ready: loaded and serving (False with the reason when refused: the previous version, if any, keeps serving). Degraded: failing calls (circuit open, budget exhausted).",
        "items": {"type": "object", "required": ["type", "status", "lastTransitionTime", "reason", "message"], "properties": {
            "type": {"type": "string", "maxLength": 316},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "reason": {"type": "string", "maxLength": 1024},
            "message": {"type": "string", "maxLength": 32768}}}}}}

def crd(kind, plural, short, cluster):
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}", "labels": {"app.kubernetes.io/name": "kube-wasm-scheduler"}},
        "spec": {"group": GROUP, "scope": "Cluster" if cluster else "Namespaced",
            "names": {"kind": kind, "listKind": kind + "List", "plural": plural, "singular": kind.lower(), "shortNames": [short],
                      "categories": ["kube-wasm-scheduler"]},
            "versions": [{"name": "v1alpha1", "served": True, "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Scheduler", "type": "string", "jsonPath": ".spec.schedulerName"},
                    {"name": "Points", "type": "string", "jsonPath": ".spec.points"},
                    {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
                    {"name": "Reason", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].reason", "priority": 1},
                    {"name": "Digest", "type": "string", "jsonPath": ".status.digest", "priority": 1},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}],
                "schema": {"openAPIV3Schema": {"type": "object",
                    "description": ("A cluster-wide scheduling policy, created by the platform team: a WebAssembly component that serves scheduling points for the pods its selectors choose, in the profile it names."
                                    if cluster else
                                    "A tenant's scheduling policy: a WebAssembly component that serves scheduling points for pods of its own namespace only, within the limits the platform sets in the profile's TenantPolicies args."),
                    "required": ["spec"],
                    "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
                                   "spec": spec(cluster), "status": STATUS}}}}]}}

class D(yaml.SafeDumper):
    pass
def str_presenter(dumper, data):
    return dumper.represent_scalar('tag:yaml.org,2002:str', data)
D.add_representer(str, str_presenter)
head = "# Tenant scheduling policies (README: \"Policies for tenants\"): SchedulingPolicy in a namespace, for that namespace's\n# pods; ClusterSchedulingPolicy for the platform team. The scheduler watches both and writes their status; the\n# profile's TenantPolicies args set what tenants may ask for. Generated by scripts/gen-crds.py: edit that, not this.\n"
docs = [crd("SchedulingPolicy", "schedulingpolicies", "spol", False), crd("ClusterSchedulingPolicy", "clusterschedulingpolicies", "cspol", True)]
out = head + "---\n".join(yaml.dump(d, Dumper=D, sort_keys=False, width=120, allow_unicode=True) for d in docs)
# The chart installs the same file (templates/crds.yaml reads it).
root = pathlib.Path(__file__).resolve().parent.parent
for path in ("deploy/manifests/crds.yaml", "deploy/chart/files/crds.yaml"):
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(out)
    print(f"gen-crds: wrote {path}")
