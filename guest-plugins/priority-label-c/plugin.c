// priority-label: Filter keeps the nodes that carry a label; Score ranks them by the label's integer value.
// Config: {"labelKey": "..."} (default "priority.example.com").
#include "filter_score_plugin.h"
#include "plugin_glue.h"

#define DEFAULT_LABEL_KEY "priority.example.com"

static char *label_key;            // set once the config is read
static const char *config_error;   // or why it could not be

// Reads the config on first use; false (with config_error) when it is invalid.
static bool configured(void) {
  if (!label_key && !config_error) {
    config_error = glue_config_string("labelKey", DEFAULT_LABEL_KEY, &label_key);
    if (config_error) glue_log(KWS_PLUGIN_HOST_LEVEL_ERROR, config_error);
  }
  return label_key != NULL;
}

// The label value as a signed decimal 64-bit integer ([+-]digits, no spaces, in range).
static bool parse_s64(const glue_str *v, int64_t *out) {
  size_t i = 0;
  bool neg = false;
  if (v->len > 0 && (v->ptr[0] == '+' || v->ptr[0] == '-')) neg = v->ptr[0] == '-', i = 1;
  if (i == v->len) return false;
  uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, n = 0;
  for (; i < v->len; i++) {
    if (v->ptr[i] < '0' || v->ptr[i] > '9') return false;
    uint64_t d = (uint64_t)(v->ptr[i] - '0');
    if (n > (limit - d) / 10) return false;
    n = n * 10 + d;
  }
  *out = neg ? (int64_t)(0 - n) : (int64_t)n;
  return true;
}

// config.validate: the host calls it when it loads the plugin, so a bad labelKey stops the scheduler before it
// serves rather than failing every pod.
bool exports_kws_plugin_config_validate(filter_score_plugin_string_t *err) {
  if (configured()) return true;
  *err = glue_format("%s", config_error);
  return false;
}

void exports_kws_plugin_nodes_apply(exports_kws_plugin_nodes_list_node_change_t *changes) {
  glue_apply(changes);
}

// Filter for one node: success when it carries the label.
static void filter_node(uint32_t slot, glue_status *st) {
  const glue_node *node = glue_node_at(slot);
  if (!configured()) {
    glue_status_reason(st, KWS_PLUGIN_TYPES_CODE_ERROR, glue_format("%s", config_error));
  } else if (!node) {
    glue_unknown_slot(st, slot);
  } else if (glue_label(node, label_key)) {
    glue_success(st);
  } else {
    glue_status_reason(st, KWS_PLUGIN_TYPES_CODE_UNSCHEDULABLE_AND_UNRESOLVABLE,
                       glue_format("node(s) didn't have label %s", label_key));
  }
}

// Filter and Score are about the cycle's pod (glue_cycle_pod(); the glue implements the `cycle` export), which this
// policy does not need, so the pod is never fetched.
void exports_kws_plugin_filter_filter(exports_kws_plugin_filter_list_node_slot_t *slots,
                                      exports_kws_plugin_filter_filter_result_t *ret) {
  glue_filter(slots, filter_node, ret);
  exports_kws_plugin_filter_list_node_slot_free(slots);
}

bool exports_kws_plugin_score_score(exports_kws_plugin_score_list_node_slot_t *slots,
                                    filter_score_plugin_list_s64_t *ret,
                                    exports_kws_plugin_score_status_t *err) {
  bool ok = true;
  int64_t *scores = glue_alloc(slots->len * sizeof *scores);
  if (!configured()) {
    glue_status_reason(err, KWS_PLUGIN_TYPES_CODE_ERROR, glue_format("%s", config_error));
    ok = false;
  }
  for (size_t i = 0; ok && i < slots->len; i++) {
    const glue_node *node = glue_node_at(slots->ptr[i]);
    if (!node) {
      glue_unknown_slot(err, slots->ptr[i]);
      ok = false;
      break;
    }
    const glue_str *value = glue_label(node, label_key);
    scores[i] = 0; // a missing label scores 0
    if (value && !parse_s64(value, &scores[i])) {
      glue_status_reason(err, KWS_PLUGIN_TYPES_CODE_ERROR,
                         glue_format("node %S: label %s has non-integer value \"%S\"", &node->name, label_key, value));
      ok = false;
    }
  }
  if (ok) {
    ret->ptr = scores;
    ret->len = slots->len;
  } else {
    free(scores);
  }
  exports_kws_plugin_score_list_node_slot_free(slots);
  return ok;
}

// scores[i] is the raw score of slots[i]; the answer keeps that order.
bool exports_kws_plugin_score_normalize_score(exports_kws_plugin_score_list_node_slot_t *slots,
                                              filter_score_plugin_list_s64_t *scores,
                                              filter_score_plugin_list_s64_t *ret,
                                              exports_kws_plugin_score_status_t *err) {
  (void)err;
  int64_t max = 0;
  for (size_t i = 0; i < scores->len; i++) {
    if (scores->ptr[i] > max) max = scores->ptr[i];
  }
  ret->len = scores->len;
  ret->ptr = glue_alloc(scores->len * sizeof *ret->ptr);
  for (size_t i = 0; i < scores->len; i++) {
    int64_t s = scores->ptr[i];
    // max <= 0: every score is 0; 128-bit so that s * 100 cannot overflow.
    ret->ptr[i] = max <= 0 || s <= 0 ? 0 : (int64_t)((__int128)s * 100 / max);
  }
  exports_kws_plugin_score_list_node_slot_free(slots);
  filter_score_plugin_list_s64_free(scores);
  return true;
}
