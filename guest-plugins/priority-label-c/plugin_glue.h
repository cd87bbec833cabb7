// Contract glue for kws:plugin@0.2.1 guests in C: the node table, the cycle's pod (it implements the `cycle`
// export), status constructors, Filter's batched answer, the plugin's config, the waiting pods, and (opt-in, for
// worlds that export them) the pod view and the events list.
// Header-only; include it once, after the generated header of the plugin's world (filter_score_plugin.h, or the
// world `plugin.yaml` names). `plugin build` defines GLUE_WORLD as that world's C name: its string and list types
// carry it. Before the include, define GLUE_POD_VIEW when the world exports `pods`, GLUE_EVENTS when it exports
// `events`, and GLUE_NO_CYCLE when it exports neither Filter nor Score (so no `cycle`): the glue's code for what a
// world lacks would not compile against its bindings, and a plugin pays only for what it asks.
//
// Ownership (wit-bindgen c): an export owns its arguments and frees them; what it returns is freed by the
// generated post-return code, so every string and list put into a result must come from malloc.
#ifndef PLUGIN_GLUE_H
#define PLUGIN_GLUE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef GLUE_WORLD
#define GLUE_WORLD filter_score_plugin
#endif
#define GLUE_CAT_(a, b) a##_##b
#define GLUE_CAT(a, b) GLUE_CAT_(a, b)
// A world-level name of the generated bindings: GLUE_W(string_t) is filter_score_plugin_string_t.
#define GLUE_W(name) GLUE_CAT(GLUE_WORLD, name)

typedef GLUE_W(string_t) glue_str;
typedef kws_plugin_types_status_t glue_status;

// malloc for results: NULL for 0 bytes (post-return frees only non-empty lists), aborts when out of memory.
static void *glue_alloc(size_t n) {
  if (n == 0) return NULL;
  void *p = malloc(n);
  if (!p) abort();
  return p;
}

// ---- node table: slot -> (name, labels) ----

typedef struct {
  bool used;
  glue_str name;
  kws_plugin_types_labels_t labels; // owned copy, sorted by key as the host sends them
} glue_node;

static glue_node *glue_nodes;
static size_t glue_nodes_len;

static void glue_node_clear(glue_node *n) {
  if (n->used) {
    GLUE_W(string_free)(&n->name);
    kws_plugin_types_labels_free(&n->labels);
  }
  memset(n, 0, sizeof *n);
}

// Applies the host's changes in order, taking the name and labels out of each upserted node.
static void glue_apply(exports_kws_plugin_nodes_list_node_change_t *changes) {
  for (size_t i = 0; i < changes->len; i++) {
    kws_plugin_types_node_change_t *c = &changes->ptr[i];
    uint32_t slot = c->tag == KWS_PLUGIN_TYPES_NODE_CHANGE_UPSERT ? c->val.upsert.f0 : c->val.remove;
    if (slot >= glue_nodes_len) {
      if (c->tag != KWS_PLUGIN_TYPES_NODE_CHANGE_UPSERT) continue;
      size_t len = glue_nodes_len ? glue_nodes_len : 64;
      while (len <= slot) len *= 2;
      glue_node *grown = realloc(glue_nodes, len * sizeof *grown);
      if (!grown) abort();
      memset(grown + glue_nodes_len, 0, (len - glue_nodes_len) * sizeof *grown);
      glue_nodes = grown;
      glue_nodes_len = len;
    }
    glue_node *n = &glue_nodes[slot];
    glue_node_clear(n);
    if (c->tag == KWS_PLUGIN_TYPES_NODE_CHANGE_UPSERT) {
      kws_plugin_types_node_t *node = &c->val.upsert.f1;
      n->used = true;
      n->name = node->name; // moved: the change list no longer owns them
      n->labels = node->labels;
      memset(&node->name, 0, sizeof node->name);
      memset(&node->labels, 0, sizeof node->labels);
    }
  }
  exports_kws_plugin_nodes_list_node_change_free(changes);
}

// The node at `slot`, or NULL when the slot is empty.
static const glue_node *glue_node_at(uint32_t slot) {
  return slot < glue_nodes_len && glue_nodes[slot].used ? &glue_nodes[slot] : NULL;
}

static bool glue_str_eq(const glue_str *s, const char *c) {
  size_t len = strlen(c);
  return s->len == len && memcmp(s->ptr, c, len) == 0;
}

// The value of `key` in labels (a node's or a pod's), or NULL.
static const glue_str *glue_labels_get(const kws_plugin_types_labels_t *labels, const char *key) {
  for (size_t i = 0; i < labels->len; i++) {
    if (glue_str_eq(&labels->ptr[i].f0, key)) return &labels->ptr[i].f1;
  }
  return NULL;
}

// The value of the node's label `key`, or NULL.
static const glue_str *glue_label(const glue_node *n, const char *key) {
  return glue_labels_get(&n->labels, key);
}

// The value of the pod's label `key`, or NULL.
static const glue_str *glue_pod_label(const kws_plugin_types_pod_t *pod, const char *key) {
  return glue_labels_get(&pod->labels, key);
}

static bool glue_str_same(const glue_str *a, const glue_str *b) {
  return a->len == b->len && (a->len == 0 || memcmp(a->ptr, b->ptr, a->len) == 0);
}

// ---- waiting pods (host.waiting-pods, allow-waiting-pod, reject-waiting-pod): upstream's IterateOverWaitingPods,
// WaitingPod.Allow and WaitingPod.Reject, on behalf of this plugin ----

typedef kws_plugin_host_list_waiting_pod_t glue_waiting;

// The pods of this plugin's profile waiting at Permit, in no order (.ptr[i].pod, .node, .pending_plugins); the
// caller frees them with glue_waiting_free.
static glue_waiting glue_waiting_pods(void) {
  glue_waiting w;
  kws_plugin_host_waiting_pods(&w);
  return w;
}

static void glue_waiting_free(glue_waiting *w) {
  kws_plugin_host_list_waiting_pod_free(w);
}

// Allows the waiting pod with this UID (imports borrow their arguments); false when no such pod waits.
static bool glue_allow_waiting_pod(const glue_str *uid) {
  return kws_plugin_host_allow_waiting_pod((glue_str *)uid, NULL);
}

// Rejects the waiting pod with this UID with `reason` (its binding cycle fails as Unschedulable); false when no
// such pod waits.
static bool glue_reject_waiting_pod(const glue_str *uid, const glue_str *reason) {
  return kws_plugin_host_reject_waiting_pod((glue_str *)uid, NULL, (glue_str *)reason);
}

#ifdef GLUE_POD_VIEW
// ---- the pod view (the `pods` export): every pod the scheduler knows, kept from the host's change lists ----

static kws_plugin_types_known_pod_t *glue_view; // owned; unordered
static size_t glue_view_len, glue_view_cap;

static size_t glue_view_find(const glue_str *uid) {
  size_t i = 0;
  while (i < glue_view_len && !glue_str_same(&glue_view[i].pod.uid, uid)) i++;
  return i;
}

// Applies the host's changes in order (call it from exports_kws_plugin_pods_apply); takes the pods out of the
// list and frees the rest.
static void glue_pods_apply(exports_kws_plugin_pods_list_pod_change_t *changes) {
  for (size_t c = 0; c < changes->len; c++) {
    kws_plugin_types_pod_change_t *ch = &changes->ptr[c];
    if (ch->tag == KWS_PLUGIN_TYPES_POD_CHANGE_RESET) {
      for (size_t i = 0; i < glue_view_len; i++) kws_plugin_types_known_pod_free(&glue_view[i]);
      glue_view_len = 0;
    } else if (ch->tag == KWS_PLUGIN_TYPES_POD_CHANGE_REMOVE) {
      size_t i = glue_view_find(&ch->val.remove);
      if (i < glue_view_len) {
        kws_plugin_types_known_pod_free(&glue_view[i]);
        glue_view[i] = glue_view[--glue_view_len]; // order does not matter: swap the last one in
      }
    } else {
      size_t i = glue_view_find(&ch->val.upsert.pod.uid);
      if (i < glue_view_len) {
        kws_plugin_types_known_pod_free(&glue_view[i]);
      } else {
        if (glue_view_len == glue_view_cap) {
          glue_view_cap = glue_view_cap ? glue_view_cap * 2 : 64;
          glue_view = realloc(glue_view, glue_view_cap * sizeof *glue_view);
          if (!glue_view) abort();
        }
        glue_view_len++;
      }
      glue_view[i] = ch->val.upsert; // moved: the change list no longer owns it
      memset(&ch->val.upsert, 0, sizeof ch->val.upsert);
    }
  }
  exports_kws_plugin_pods_list_pod_change_free(changes);
}

// How many pods the view holds; glue_known_pod(i) for i below it reads them (in no order).
static size_t glue_pods_len(void) {
  return glue_view_len;
}

static const kws_plugin_types_known_pod_t *glue_known_pod(size_t i) {
  return i < glue_view_len ? &glue_view[i] : NULL;
}

// The pod with this UID, or NULL (a linear search: fine for the samples' few pods; index by what the policy asks
// when the view is large).
static const kws_plugin_types_known_pod_t *glue_pod_by_uid(const glue_str *uid) {
  size_t i = glue_view_find(uid);
  return i < glue_view_len ? &glue_view[i] : NULL;
}

// True when the pod is assumed or bound (on a node), not pending.
static bool glue_pod_placed(const kws_plugin_types_known_pod_t *p) {
  return p->state != KWS_PLUGIN_TYPES_POD_STATE_PENDING;
}
#endif

#ifdef GLUE_EVENTS
// ---- events (the `events` export) ----

// The answer of events-to-register from `n` events (copied into memory the post-return code frees).
static void glue_events(exports_kws_plugin_events_list_cluster_event_t *ret, const kws_plugin_types_cluster_event_t *events,
                        size_t n) {
  ret->ptr = glue_alloc(n * sizeof *ret->ptr);
  if (n) memcpy(ret->ptr, events, n * sizeof *ret->ptr);
  ret->len = n;
}
#endif

#ifndef GLUE_NO_CYCLE
// ---- the cycle's pod: fetched from the host on first use after cycle.begin, since each fetch copies it all ----

static kws_plugin_host_pod_t glue_pod; // owned; valid when glue_pod_cached
static bool glue_pod_cached;

// The `cycle` export: the cached pod belongs to the previous cycle, so free it and fetch again on next use.
void exports_kws_plugin_cycle_begin(void) {
  if (glue_pod_cached) kws_plugin_host_pod_free(&glue_pod);
  glue_pod_cached = false;
}

// The pod of the current cycle (the one Filter, Score and NormalizeScore are about), or NULL when the host has
// none (outside those calls). Valid until the next begin. A none is not cached: asking costs no pod copy, and a
// none seen outside those calls must not hide the pod from the ones that follow.
static const kws_plugin_types_pod_t *glue_cycle_pod(void) {
  if (!glue_pod_cached) glue_pod_cached = kws_plugin_host_cycle_pod(&glue_pod);
  return glue_pod_cached ? &glue_pod : NULL;
}
#endif

// ---- statuses (reasons are malloc'd: the post-return code frees them) ----

typedef struct {
  char *ptr;
  size_t len, cap;
} glue_buf;

static void glue_put(glue_buf *b, const void *p, size_t n) {
  if (b->len + n > b->cap) {
    b->cap = (b->len + n) * 2 + 16;
    b->ptr = realloc(b->ptr, b->cap);
    if (!b->ptr) abort();
  }
  memcpy(b->ptr + b->len, p, n);
  b->len += n;
}

// A malloc'd string from `fmt`, where %s is a C string, %S a glue_str *, %u an unsigned int. (Not printf: that
// would pull in wasi-libc's stdio and with it WASI imports.)
static glue_str glue_format(const char *fmt, ...) {
  glue_buf b = {0};
  va_list ap;
  va_start(ap, fmt);
  for (const char *f = fmt; *f; f++) {
    if (*f != '%' || !f[1]) {
      glue_put(&b, f, 1);
      continue;
    }
    switch (*++f) {
      case 's': {
        const char *s = va_arg(ap, const char *);
        glue_put(&b, s, strlen(s));
        break;
      }
      case 'S': {
        const glue_str *s = va_arg(ap, const glue_str *);
        glue_put(&b, s->ptr, s->len);
        break;
      }
      case 'u': {
        char digits[10], *d = digits + sizeof digits;
        unsigned v = va_arg(ap, unsigned);
        do *--d = (char)('0' + v % 10); while (v /= 10);
        glue_put(&b, d, (size_t)(digits + sizeof digits - d));
        break;
      }
      default:
        glue_put(&b, f, 1);
    }
  }
  va_end(ap);
  return (glue_str){(uint8_t *)b.ptr, b.len};
}

static void glue_success(glue_status *st) {
  st->code = KWS_PLUGIN_TYPES_CODE_SUCCESS;
  st->reasons.ptr = NULL;
  st->reasons.len = 0;
}

static void glue_status_reason(glue_status *st, kws_plugin_types_code_t code, glue_str reason) {
  st->code = code;
  st->reasons.ptr = malloc(sizeof *st->reasons.ptr);
  if (!st->reasons.ptr) abort();
  st->reasons.ptr[0] = reason;
  st->reasons.len = 1;
}

static void glue_unknown_slot(glue_status *st, uint32_t slot) {
  glue_status_reason(st, KWS_PLUGIN_TYPES_CODE_ERROR, glue_format("unknown node slot %u", (unsigned)slot));
}

static void glue_log(kws_plugin_host_level_t level, const char *msg) {
  glue_str s = {(uint8_t *)msg, strlen(msg)};
  kws_plugin_host_log(level, &s);
}

// Same status: equal code and equal reasons (as byte strings, in order).
static bool glue_status_eq(const glue_status *a, const glue_status *b) {
  if (a->code != b->code || a->reasons.len != b->reasons.len) return false;
  for (size_t i = 0; i < a->reasons.len; i++) {
    const glue_str *x = &a->reasons.ptr[i], *y = &b->reasons.ptr[i];
    if (x->len != y->len || (x->len > 0 && memcmp(x->ptr, y->ptr, x->len) != 0)) return false;
  }
  return true;
}

#ifndef GLUE_NO_CYCLE
// ---- filter: per-node statuses -> filter-result ----

// Filter's answer for the call's `slots`, from the policy's per-node decision: `decide(slot, &st)` fills the
// status of one node (built with the constructors above; the glue takes it over). A node whose status is not
// success is rejected; equal statuses are sent once (the duplicates are freed), in order of first appearance.
// Does not free `slots`. The linear search over distinct statuses is fine for the usual few distinct reasons.
static void glue_filter(const exports_kws_plugin_filter_list_node_slot_t *slots,
                        void (*decide)(uint32_t slot, glue_status *st),
                        exports_kws_plugin_filter_filter_result_t *ret) {
  size_t n = slots->len, distinct = 0, count = 0;
  glue_status *statuses = glue_alloc(n * sizeof *statuses);
  uint32_t *rejected = glue_alloc(n * sizeof *rejected);
  uint32_t *verdicts = glue_alloc(n * sizeof *verdicts);
  for (size_t i = 0; i < n; i++) {
    glue_status st;
    decide(slots->ptr[i], &st);
    if (st.code == KWS_PLUGIN_TYPES_CODE_SUCCESS) {
      kws_plugin_types_status_free(&st);
      continue;
    }
    size_t k = 0;
    while (k < distinct && !glue_status_eq(&statuses[k], &st)) k++;
    if (k == distinct) {
      statuses[distinct++] = st; // moved into the result
    } else {
      kws_plugin_types_status_free(&st);
    }
    rejected[count] = (uint32_t)i;
    verdicts[count] = (uint32_t)k;
    count++;
  }
  if (count == 0) {
    // The post-return code frees only non-empty lists: empty ones must not own memory.
    free(statuses);
    free(rejected);
    free(verdicts);
    statuses = NULL;
    rejected = verdicts = NULL;
  }
  ret->statuses.ptr = statuses;
  ret->statuses.len = distinct;
  ret->rejected.ptr = rejected;
  ret->rejected.len = count;
  ret->verdicts.ptr = verdicts;
  ret->verdicts.len = count;
}
#endif

// ---- config: one string member of the JSON object from host.config() ----

typedef struct {
  const char *p, *end;
} glue_json;

static void glue_json_ws(glue_json *j) {
  while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

static void glue_utf8(char **o, uint32_t c) {
  if (c < 0x80) {
    *(*o)++ = (char)c;
  } else if (c < 0x800) {
    *(*o)++ = (char)(0xC0 | c >> 6), *(*o)++ = (char)(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    *(*o)++ = (char)(0xE0 | c >> 12), *(*o)++ = (char)(0x80 | (c >> 6 & 0x3F)), *(*o)++ = (char)(0x80 | (c & 0x3F));
  } else {
    *(*o)++ = (char)(0xF0 | c >> 18), *(*o)++ = (char)(0x80 | (c >> 12 & 0x3F));
    *(*o)++ = (char)(0x80 | (c >> 6 & 0x3F)), *(*o)++ = (char)(0x80 | (c & 0x3F));
  }
}

static bool glue_hex4(glue_json *j, uint32_t *out) {
  if (j->end - j->p < 4) return false;
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    char c = *j->p++;
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
    else return false;
  }
  *out = v;
  return true;
}

// Parses a JSON string at j->p; with `out`, stores it decoded and NUL-terminated (malloc'd).
static bool glue_json_string(glue_json *j, char **out) {
  if (j->p >= j->end || *j->p != '"') return false;
  j->p++;
  char *buf = out ? malloc((size_t)(j->end - j->p) + 1) : NULL, *o = buf;
  if (out && !buf) abort();
  while (j->p < j->end && *j->p != '"') {
    char c = *j->p++;
    if ((unsigned char)c < 0x20) goto fail;
    if (c != '\\') {
      if (o) *o++ = c;
      continue;
    }
    if (j->p >= j->end) goto fail;
    c = *j->p++;
    const char *simple = strchr("\"\\/bfnrt", c);
    if (c && simple) {
      if (o) *o++ = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
    } else if (c == 'u') {
      uint32_t u, lo;
      if (!glue_hex4(j, &u)) goto fail;
      if (u >= 0xD800 && u < 0xDC00 && j->end - j->p >= 6 && j->p[0] == '\\' && j->p[1] == 'u') {
        j->p += 2;
        if (!glue_hex4(j, &lo) || lo < 0xDC00 || lo > 0xDFFF) goto fail;
        u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
      } else if (u >= 0xD800 && u < 0xE000) {
        goto fail; // lone surrogate
      }
      if (o) glue_utf8(&o, u);
    } else {
      goto fail;
    }
  }
  if (j->p >= j->end) goto fail;
  j->p++;
  if (out) *o = 0, *out = buf;
  return true;
fail:
  free(buf);
  return false;
}

// Skips any JSON value (validating strings and bracket nesting, loosely checking scalars).
static bool glue_json_skip(glue_json *j) {
  int depth = 0;
  do {
    glue_json_ws(j);
    if (j->p >= j->end) return false;
    char c = *j->p;
    if (c == '"') {
      if (!glue_json_string(j, NULL)) return false;
    } else if (c == '{' || c == '[') {
      depth++, j->p++;
    } else if (c == '}' || c == ']') {
      if (depth == 0) return false;
      depth--, j->p++;
    } else if (c == ',' || c == ':') {
      if (depth == 0) return false;
      j->p++;
    } else if (strchr("-0123456789tfnrueals.+E", c)) {
      while (j->p < j->end && strchr("-0123456789tfnrueals.+E", *j->p) && *j->p) j->p++;
    } else {
      return false;
    }
  } while (depth > 0);
  return true;
}

// Reads the string member `key` of the host's JSON config into *out (malloc'd), `dflt` when absent.
// Returns NULL on success, else a message (static).
static const char *glue_config_string(const char *key, const char *dflt, char **out) {
  glue_str cfg;
  kws_plugin_host_config(&cfg);
  glue_json j = {(const char *)cfg.ptr, (const char *)cfg.ptr + cfg.len};
  const char *err = NULL;
  char *found = NULL, *name = NULL;
  glue_json_ws(&j);
  if (j.p >= j.end || *j.p++ != '{') {
    err = "invalid config: not a JSON object";
    goto done;
  }
  glue_json_ws(&j);
  if (j.p < j.end && *j.p == '}') {
    j.p++;
  } else {
    for (;;) {
      glue_json_ws(&j);
      if (!glue_json_string(&j, &name)) goto bad;
      glue_json_ws(&j);
      if (j.p >= j.end || *j.p++ != ':') goto bad;
      glue_json_ws(&j);
      if (strcmp(name, key) == 0) {
        if (j.p >= j.end || *j.p != '"') {
          static char msg[128] = "invalid config: ";
          strncat(msg, key, sizeof msg - 40);
          strcat(msg, " must be a string");
          err = msg;
          goto done;
        }
        free(found);
        if (!glue_json_string(&j, &found)) goto bad;
      } else if (!glue_json_skip(&j)) {
        goto bad;
      }
      free(name);
      name = NULL;
      glue_json_ws(&j);
      if (j.p < j.end && *j.p == ',') {
        j.p++;
        continue;
      }
      if (j.p < j.end && *j.p == '}') {
        j.p++;
        break;
      }
      goto bad;
    }
  }
  glue_json_ws(&j);
  if (j.p != j.end) goto bad;
  *out = found ? found : strdup(dflt);
  found = NULL;
  goto done;
bad:
  err = "invalid config: malformed JSON";
done:
  free(name);
  free(found);
  GLUE_W(string_free)(&cfg);
  return err;
}

#endif
