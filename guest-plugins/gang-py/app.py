"""gang-py: a tiny gang (the pods of a group are bound together or not at all) in Python, to exercise the glue's 0.2
additions: the pod view, the waiting pods, and events with a queueing hint. The same policy as gang-c, gang-js and
gang-go (and a small part of the Rust coscheduling guest); world gang-plugin.

A pod is in group `namespace/G` when it carries the label pod-group.scheduling.sigs.k8s.io/name: G, and the group
needs pod-group.scheduling.sigs.k8s.io/min-available: "N" of its pods placed at once (1 when absent).
- PreFilter: fewer pods of the group in the pod view than N is UnschedulableAndUnresolvable.
- Permit: once N pods of the group are assumed or bound (this one included), allow every waiting sibling and go on;
  until then wait, at most WAIT_MS.
- Unreserve (a member timed out or was rejected): reject every other waiting pod of the group.
- Events: a pending pod created with the group's label, or labelled later, may complete the group: the hint answers
  queue only for a pod that joins the rejected pod's group.
"""

from wit_world import exports
from wit_world.exports.permit import PermitResult
from wit_world.exports.pre_filter import PreFilterResult
from wit_world.imports.types import ClusterEvent, EventActions, EventObject_Pod, EventResource, QueueingHint

from plugin_glue import NodeTable, label, placed, pods, success, unresolvable, wait
from plugin_glue import allow_waiting_pod, reject_waiting_pod, waiting_pods
from plugin_glue import Pods  # the `pods` export: keeps the view `pods` up to date

GROUP = "pod-group.scheduling.sigs.k8s.io/name"
MIN_AVAILABLE = "pod-group.scheduling.sigs.k8s.io/min-available"
WAIT_MS = 2000

nodes = NodeTable()


def group_of(pod):
    """The pod's group label, or None when it has none (or an empty one)."""
    return label(pod, GROUP) or None


def in_group(pod, namespace, group):
    return pod.namespace == namespace and label(pod, GROUP) == group


def min_available(pod):
    """The pod's min-available: 1 without the label, 0 when it is not a positive integer."""
    value = label(pod, MIN_AVAILABLE)
    if value is None:
        return 1
    return int(value) if value.isdigit() and len(value) < 7 else 0


def members(pod, group):
    """The group's known pods."""
    return pods.with_label(GROUP, group, namespace=pod.namespace)


def waiting_siblings(pod, group):
    """The UIDs of the group's pods waiting at Permit, except `pod`."""
    return [w.pod.uid for w in waiting_pods() if in_group(w.pod, pod.namespace, group) and w.pod.uid != pod.uid]


class Config(exports.Config):
    def validate(self):
        pass


class Nodes(exports.Nodes):
    def apply(self, changes):
        nodes.apply(changes)


class PreFilter(exports.PreFilter):
    def pre_filter(self, pod):
        group = group_of(pod)
        if group is None:
            return PreFilterResult(status=success(), node_names=None)
        need = min_available(pod)
        if need == 0:
            reason = f"pod {pod.namespace}/{pod.name}: label {MIN_AVAILABLE} wants a positive integer"
            return PreFilterResult(status=unresolvable(reason), node_names=None)
        have = len(members(pod, group))
        if have < need:
            reason = (
                f"pre-filter pod {pod.name} cannot find enough sibling pods, current pods number: {have}, "
                f"minMember: {need}, podGroup: {pod.namespace}/{group}"
            )
            return PreFilterResult(status=unresolvable(reason), node_names=None)
        return PreFilterResult(status=success(), node_names=None)

    # PreFilter's what-ifs: the group does not depend on which node a pod is on.
    def add_pod(self, pod, pod_to_add, node):
        return success()

    def remove_pod(self, pod, pod_to_remove, node):
        return success()


class Reserve(exports.Reserve):
    def reserve(self, pod, node):
        return success()

    def unreserve(self, pod, node):
        # A member left (timed out, or was rejected): its waiting siblings cannot complete the group without it.
        group = group_of(pod)
        if group is None:
            return
        reason = f"rejection in Unreserve: pod {pod.namespace}/{pod.name} of PodGroup {pod.namespace}/{group} left"
        for uid in waiting_siblings(pod, group):
            reject_waiting_pod(uid, reason)


class Permit(exports.Permit):
    def permit(self, pod, node):
        group = group_of(pod)
        need = min_available(pod) if group else 0
        if need == 0:
            return PermitResult(status=success(), timeout_ms=0)
        done = sum(1 for k in members(pod, group) if placed(k))
        # The host shows the pod assumed before Permit runs; count it anyway if that update has not arrived.
        me = pods.get(pod.uid)
        if me is None or not placed(me):
            done += 1
        if done < need:
            reason = f"waiting for {need - done} more pod(s) of PodGroup {pod.namespace}/{group} (minMember {need})"
            return PermitResult(status=wait(reason), timeout_ms=WAIT_MS)
        for uid in waiting_siblings(pod, group):
            allow_waiting_pod(uid)
        return PermitResult(status=success(), timeout_ms=0)


class Events(exports.Events):
    def events_to_register(self):
        return [
            ClusterEvent(
                resource=EventResource.UNSCHEDULED_POD, actions=EventActions.ADD | EventActions.UPDATE_LABEL
            )
        ]

    def queueing_hint(self, pod, event, old, new):
        # Queue only for a pod that joins the rejected pod's group (it was not in it before the event).
        group = group_of(pod)

        def in_it(obj):
            return isinstance(obj, EventObject_Pod) and in_group(obj.value, pod.namespace, group)

        if group is not None and in_it(new) and not in_it(old):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP
