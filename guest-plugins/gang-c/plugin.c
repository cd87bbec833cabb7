// gang-c: a tiny gang (the pods of a group are bound together or not at all) in C, to exercise the glue's 0.2
// additions: the pod view, the waiting pods, and events with a queueing hint. The same policy as gang-py, gang-js
// and gang-go (and a small part of the Rust coscheduling guest); world gang-plugin.
//
// A pod is in group `namespace/G` when it carries the label pod-group.scheduling.sigs.k8s.io/name: G, and the
// group needs pod-group.scheduling.sigs.k8s.io/min-available: "N" of its pods placed at once (1 when absent).
// - PreFilter: fewer pods of the group in the pod view than N is UnschedulableAndUnresolvable.
// - Permit: once N pods of the group are assumed or bound (this one included), allow every waiting sibling and go
//   on; until then wait, at most WAIT_MS.
// - Unreserve (a member timed out or was rejected): reject every other waiting pod of the group.
// - Events: a pending pod created with the group's label, or labelled later, may complete the group: the hint
//   answers queue only for a pod that joins the rejected pod's group.
#include "gang_plugin.h"
#define GLUE_POD_VIEW
#define GLUE_EVENTS
#define GLUE_NO_CYCLE
#include "plugin_glue.h"

#define GROUP "pod-group.scheduling.sigs.k8s.io/name"
#define MIN_AVAILABLE "pod-group.scheduling.sigs.k8s.io/min-available"
#define WAIT_MS 2000

// The pod's group label, or NULL when it has none (or an empty one).
static const glue_str *group_of(const kws_plugin_types_pod_t *pod) {
  const glue_str *g = glue_pod_label(pod, GROUP);
  return g && g->len > 0 ? g : NULL;
}

// True when `pod` is in group `g` of namespace `ns`.
static bool in_group(const kws_plugin_types_pod_t *pod, const glue_str *ns, const glue_str *g) {
  const glue_str *other = glue_pod_label(pod, GROUP);
  return other && glue_str_same(other, g) && glue_str_same(&pod->namespace_, ns);
}

// The pod's min-available: 1 without the label, 0 when it is not a positive integer.
static unsigned min_available(const kws_plugin_types_pod_t *pod) {
  const glue_str *v = glue_pod_label(pod, MIN_AVAILABLE);
  if (!v) return 1;
  unsigned n = 0;
  for (size_t i = 0; i < v->len; i++) {
    if (v->ptr[i] < '0' || v->ptr[i] > '9' || n > 100000) return 0;
    n = n * 10 + (unsigned)(v->ptr[i] - '0');
  }
  return n;
}

// The group's pods in the pod view: all of them, and those assumed or bound.
static void count(const kws_plugin_types_pod_t *pod, const glue_str *g, unsigned *members, unsigned *placed) {
  *members = *placed = 0;
  for (size_t i = 0; i < glue_pods_len(); i++) {
    const kws_plugin_types_known_pod_t *k = glue_known_pod(i);
    if (!in_group(&k->pod, &pod->namespace_, g)) continue;
    (*members)++;
    if (glue_pod_placed(k)) (*placed)++;
  }
}

bool exports_kws_plugin_config_validate(gang_plugin_string_t *err) {
  (void)err;
  return true;
}

void exports_kws_plugin_nodes_apply(exports_kws_plugin_nodes_list_node_change_t *changes) {
  glue_apply(changes);
}

void exports_kws_plugin_pods_apply(exports_kws_plugin_pods_list_pod_change_t *changes) {
  glue_pods_apply(changes);
}

void exports_kws_plugin_pre_filter_pre_filter(exports_kws_plugin_pre_filter_pod_t *pod,
                                              exports_kws_plugin_pre_filter_pre_filter_result_t *ret) {
  memset(ret, 0, sizeof *ret);
  glue_success(&ret->status);
  const glue_str *g = group_of(pod);
  if (g) {
    unsigned min = min_available(pod), members, placed;
    count(pod, g, &members, &placed);
    if (min == 0) {
      glue_status_reason(&ret->status, KWS_PLUGIN_TYPES_CODE_UNSCHEDULABLE_AND_UNRESOLVABLE,
                         glue_format("pod %S/%S: label %s wants a positive integer", &pod->namespace_, &pod->name,
                                     MIN_AVAILABLE));
    } else if (members < min) {
      glue_status_reason(&ret->status, KWS_PLUGIN_TYPES_CODE_UNSCHEDULABLE_AND_UNRESOLVABLE,
                         glue_format("pre-filter pod %S cannot find enough sibling pods, current pods number: %u, "
                                     "minMember: %u, podGroup: %S/%S",
                                     &pod->name, members, min, &pod->namespace_, g));
    }
  }
  kws_plugin_types_pod_free(pod);
}

// PreFilter's what-ifs: the group does not depend on which node a pod is on.
void exports_kws_plugin_pre_filter_add_pod(exports_kws_plugin_pre_filter_pod_t *pod,
                                           exports_kws_plugin_pre_filter_pod_t *pod_to_add, uint32_t node,
                                           exports_kws_plugin_pre_filter_status_t *ret) {
  glue_success(ret);
  kws_plugin_types_pod_free(pod);
  kws_plugin_types_pod_free(pod_to_add);
}

void exports_kws_plugin_pre_filter_remove_pod(exports_kws_plugin_pre_filter_pod_t *pod,
                                              exports_kws_plugin_pre_filter_pod_t *pod_to_remove, uint32_t node,
                                              exports_kws_plugin_pre_filter_status_t *ret) {
  glue_success(ret);
  kws_plugin_types_pod_free(pod);
  kws_plugin_types_pod_free(pod_to_remove);
}

void exports_kws_plugin_reserve_reserve(exports_kws_plugin_reserve_pod_t *pod, gang_plugin_string_t *node,
                                        exports_kws_plugin_reserve_status_t *ret) {
  glue_success(ret);
  kws_plugin_types_pod_free(pod);
  gang_plugin_string_free(node);
}

// A member left (timed out, or was rejected): its waiting siblings cannot complete the group without it.
void exports_kws_plugin_reserve_unreserve(exports_kws_plugin_reserve_pod_t *pod, gang_plugin_string_t *node) {
  const glue_str *g = group_of(pod);
  if (g) {
    glue_str reason = glue_format("rejection in Unreserve: pod %S/%S of PodGroup %S/%S left", &pod->namespace_,
                                  &pod->name, &pod->namespace_, g);
    glue_waiting w = glue_waiting_pods();
    for (size_t i = 0; i < w.len; i++) {
      const kws_plugin_types_pod_t *p = &w.ptr[i].pod;
      if (in_group(p, &pod->namespace_, g) && !glue_str_same(&p->uid, &pod->uid)) glue_reject_waiting_pod(&p->uid, &reason);
    }
    glue_waiting_free(&w);
    free(reason.ptr);
  }
  kws_plugin_types_pod_free(pod);
  gang_plugin_string_free(node);
}

void exports_kws_plugin_permit_permit(exports_kws_plugin_permit_pod_t *pod, gang_plugin_string_t *node,
                                      exports_kws_plugin_permit_permit_result_t *ret) {
  memset(ret, 0, sizeof *ret);
  glue_success(&ret->status);
  const glue_str *g = group_of(pod);
  unsigned min = g ? min_available(pod) : 0;
  if (g && min > 0) {
    unsigned members, placed;
    count(pod, g, &members, &placed);
    // The host shows the pod assumed before Permit runs; count it anyway if that update has not arrived.
    const kws_plugin_types_known_pod_t *self = glue_pod_by_uid(&pod->uid);
    if (!self || !glue_pod_placed(self)) placed++;
    if (placed < min) {
      glue_status_reason(&ret->status, KWS_PLUGIN_TYPES_CODE_WAIT,
                         glue_format("waiting for %u more pod(s) of PodGroup %S/%S (minMember %u)", min - placed,
                                     &pod->namespace_, g, min));
      ret->timeout_ms = WAIT_MS;
    } else {
      glue_waiting w = glue_waiting_pods();
      for (size_t i = 0; i < w.len; i++) {
        const kws_plugin_types_pod_t *p = &w.ptr[i].pod;
        if (in_group(p, &pod->namespace_, g) && !glue_str_same(&p->uid, &pod->uid)) glue_allow_waiting_pod(&p->uid);
      }
      glue_waiting_free(&w);
    }
  }
  kws_plugin_types_pod_free(pod);
  gang_plugin_string_free(node);
}

void exports_kws_plugin_events_events_to_register(exports_kws_plugin_events_list_cluster_event_t *ret) {
  const kws_plugin_types_cluster_event_t events[] = {
      {KWS_PLUGIN_TYPES_EVENT_RESOURCE_UNSCHEDULED_POD,
       KWS_PLUGIN_TYPES_EVENT_ACTIONS_ADD | KWS_PLUGIN_TYPES_EVENT_ACTIONS_UPDATE_LABEL},
  };
  glue_events(ret, events, sizeof events / sizeof events[0]);
}

// True when the event object is a pod of group `g` in namespace `ns`.
static bool object_in_group(const kws_plugin_types_event_object_t *o, const glue_str *ns, const glue_str *g) {
  return o && o->tag == KWS_PLUGIN_TYPES_EVENT_OBJECT_POD && in_group(&o->val.pod, ns, g);
}

// Queue only for a pod that joins the rejected pod's group (it was not in it before the event).
kws_plugin_types_queueing_hint_t exports_kws_plugin_events_queueing_hint(exports_kws_plugin_events_pod_t *pod,
                                                                         exports_kws_plugin_events_cluster_event_t *event,
                                                                         exports_kws_plugin_events_event_object_t *old,
                                                                         exports_kws_plugin_events_event_object_t *new_) {
  const glue_str *g = group_of(pod);
  bool joins = g && object_in_group(new_, &pod->namespace_, g) && !object_in_group(old, &pod->namespace_, g);
  kws_plugin_types_pod_free(pod);
  if (old) kws_plugin_types_event_object_free(old);
  if (new_) kws_plugin_types_event_object_free(new_);
  return joins ? KWS_PLUGIN_TYPES_QUEUEING_HINT_QUEUE : KWS_PLUGIN_TYPES_QUEUEING_HINT_QUEUE_SKIP;
}
