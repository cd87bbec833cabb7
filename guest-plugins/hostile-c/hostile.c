// hostile-c: a test fixture that hands the host every kind of answer bytes can make, to prove the host's lifting
// never panics, hangs or misreads. It targets the `scheduler-plugin` world, so it exports every interface.
//
// Config (host.config): {"seed": N, "mode": "garbage" | "random-memory" | "valid", "maxWaitMs": M, "declare": D}
// (D: see declarations.declare below); maxWaitMs (default none) bounds every Permit wait, since a simulation waits
// out a Permit Wait in real time (up to 15 minutes).
//   valid          every answer is well-formed and usable (the control: the host must take each one as it is).
//   garbage        each call draws, from a PRNG seeded by the seed, host.random() and a call counter, one of:
//                  a valid answer; a well-formed but wrong one (wrong lengths, empty or huge lists, scores out of
//                  range, codes a point does not expect, a Wait of u64::MAX ms); a badly encoded one (invalid UTF-8,
//                  enum, option and result tags out of range, bools not 0/1); or raw garbage (pointers past the end
//                  of memory, into random bytes, unaligned, lengths whose byte size overflows 32 bits, a return
//                  pointer that is itself out of bounds).
//   random-memory  garbage, after filling a large part of linear memory with random bytes.
//
// The generated bindings are not compiled: their lowering cannot produce an invalid value, and their post-return
// functions would free garbage. So each export is written against the canonical ABI's flat signature and writes
// the bytes the host lifts by hand (wasm32: a status is {code: u8 @0, reasons: list<string> @4}, 12 bytes, align
// 4; a string or list is {ptr: u32, len: u32}; see the layout comment at each export). The component-type object
// of wit-bindgen c still names the world for `plugin componentize`. There are no cabi_post_* exports: everything
// lives in a bump arena that each call resets once it has read the lengths it needs from its arguments.
#include <stddef.h>
#include <stdint.h>
#include <string.h>

// ---- host imports (kws:plugin/host@0.2.1), flat signatures ----

__attribute__((__import_module__("kws:plugin/host@0.2.1"), __import_name__("log")))
extern void host_log(int32_t level, const uint8_t *ptr, size_t len);
// Writes {ptr, len} of the config string (allocated through cabi_realloc) at `ret`.
__attribute__((__import_module__("kws:plugin/host@0.2.1"), __import_name__("config")))
extern void host_config(uint8_t *ret);
__attribute__((__import_module__("kws:plugin/host@0.2.1"), __import_name__("random")))
extern int64_t host_random(void);
// host.pod-ref: a handle lent for one call (an i32), which the callee must drop before it returns.
__attribute__((__import_module__("kws:plugin/host@0.2.1"), __import_name__("[method]pod-ref.priority")))
extern int32_t host_pod_ref_priority(int32_t pod);
__attribute__((__import_module__("kws:plugin/host@0.2.1"), __import_name__("[resource-drop]pod-ref")))
extern void host_pod_ref_drop(int32_t pod);

// ---- PRNG: splitmix64 ----

static uint64_t rng;

static uint64_t next(void) {
  uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static uint32_t below(uint32_t n) { return n ? (uint32_t)(next() % n) : 0; }

static int chance(uint32_t percent) { return below(100) < percent; }

// ---- memory: a bump arena from __heap_base to the end of linear memory, grown on demand ----

extern unsigned char __heap_base;
static uintptr_t bump;

static uint32_t mem_end(void) { return (uint32_t)(__builtin_wasm_memory_size(0) * 65536u); }

static void arena_reset(void) { bump = (uintptr_t)&__heap_base; }

static void *arena_alloc(size_t size, size_t align) {
  if (!bump) arena_reset();
  uintptr_t p = (bump + align - 1) & ~(uintptr_t)(align - 1);
  if (p + size > mem_end()) {
    size_t pages = (p + size - mem_end() + 65535) / 65536;
    if (__builtin_wasm_memory_grow(0, pages) == (size_t)-1) __builtin_trap();
  }
  bump = p + size;
  return (void *)p;
}

// The host allocates arguments (and import results) here.
__attribute__((__export_name__("cabi_realloc")))
void *cabi_realloc(void *ptr, size_t old_size, size_t align, size_t new_size) {
  if (new_size == 0) return (void *)align;
  void *p = arena_alloc(new_size, align);
  if (ptr) memcpy(p, ptr, old_size < new_size ? old_size : new_size);
  return p;
}

static void put32(uint8_t *at, uint32_t v) { memcpy(at, &v, 4); }
static void put64(uint8_t *at, uint64_t v) { memcpy(at, &v, 8); }

// ---- config ----

enum mode { MODE_VALID, MODE_GARBAGE, MODE_RANDOM_MEMORY };
static enum mode mode;
static uint64_t seed, calls, salt, max_wait_ms = UINT64_MAX;
static int configured;
// The config's "declare": what declarations.declare does (see there).
enum declare { DECLARE_NOTHING, DECLARE_TRAP, DECLARE_EVERY_BIT, DECLARE_UNKNOWN_BITS };
static enum declare declare_as;

static void log_line(int32_t level, const char *msg) { host_log(level, (const uint8_t *)msg, strlen(msg)); }

// The value after "key": in the host's JSON (compact, from serde_json), or NULL.
static const char *json_value(const char *json, size_t len, const char *key) {
  size_t k = strlen(key);
  for (size_t i = 0; i + k + 3 <= len; i++) {
    if (json[i] == '"' && memcmp(json + i + 1, key, k) == 0 && json[i + 1 + k] == '"') {
      const char *p = json + i + k + 2;
      while (p < json + len && (*p == ':' || *p == ' ')) p++;
      return p < json + len ? p : NULL;
    }
  }
  return NULL;
}

// The decimal integer member `key`, when present.
static void json_u64(const char *json, size_t len, const char *key, uint64_t *out) {
  const char *s = json_value(json, len, key);
  if (!s || *s < '0' || *s > '9') return;
  *out = 0;
  while (s < json + len && *s >= '0' && *s <= '9') *out = *out * 10 + (uint64_t)(*s++ - '0');
}

static void configure(void) {
  if (configured) return;
  __attribute__((__aligned__(4))) uint8_t ret[8];
  host_config(ret);
  uint32_t ptr, len;
  memcpy(&ptr, ret, 4);
  memcpy(&len, ret + 4, 4);
  const char *json = (const char *)(uintptr_t)ptr;
  json_u64(json, len, "seed", &seed);
  json_u64(json, len, "maxWaitMs", &max_wait_ms);
  const char *m = json_value(json, len, "mode");
  mode = MODE_GARBAGE;
  if (m && *m == '"') {
    m++;
    size_t n = 0;
    while (m + n < json + len && m[n] != '"') n++;
    if (n == 5 && memcmp(m, "valid", 5) == 0) {
      mode = MODE_VALID;
    } else if (n == 13 && memcmp(m, "random-memory", 13) == 0) {
      mode = MODE_RANDOM_MEMORY;
    } else if (!(n == 7 && memcmp(m, "garbage", 7) == 0)) {
      log_line(3, "hostile-c: unknown mode (valid, garbage, random-memory)");
      __builtin_trap();
    }
  }
  const char *d = json_value(json, len, "declare");
  declare_as = DECLARE_NOTHING;
  if (d && memcmp(d, "\"trap\"", 6) == 0) declare_as = DECLARE_TRAP;
  if (d && memcmp(d, "\"every-bit\"", 11) == 0) declare_as = DECLARE_EVERY_BIT;
  if (d && memcmp(d, "\"unknown-bits\"", 14) == 0) declare_as = DECLARE_UNKNOWN_BITS;
  // Each instance draws its own salt, so a fresh instance after a trap does not replay the one before it.
  salt = (uint64_t)host_random();
  configured = 1;
}

// ---- what one call does ----

// How an answer misbehaves; every field of the answer either stays valid or takes the call's level.
enum level { VALID, WRONG, BADENC, GARBAGE };
static enum level call_level;

static uint32_t fill_span(void);

// Starts an export's answer: forgets the previous call's arena, reseeds from (seed, salt, call counter), picks the
// call's level and, in random-memory mode, sprays random bytes over memory.
static void begin_answer(void) {
  arena_reset();
  configure();
  rng = seed * 0xD1B54A32D192ED03ull ^ salt ^ (++calls * 0x9E3779B97F4A7C15ull);
  next();
  if (mode == MODE_VALID) {
    call_level = VALID;
  } else {
    uint32_t r = below(100);
    call_level = r < 35 ? VALID : r < 55 ? WRONG : r < 75 ? BADENC : GARBAGE;
  }
  if (mode == MODE_RANDOM_MEMORY) {
    // 2 MiB past the arena's start: the random pointers below land in it.
    uint32_t span = fill_span();
    uint8_t *p = arena_alloc(span, 8);
    for (uint32_t i = 0; i < span; i += 8) put64(p + i, next());
    arena_reset();
  }
}

static uint32_t fill_span(void) { return 2u << 20; }

// The level of one field: the call's level half the time, else valid.
static enum level field_level(void) { return call_level != VALID && chance(50) ? call_level : VALID; }

// ---- building blocks: strings, lists, statuses ----

static uint32_t copy_in(const void *bytes, size_t n, size_t align) {
  uint8_t *p = arena_alloc(n ? n : 1, align);
  memcpy(p, bytes, n);
  return (uint32_t)(uintptr_t)p;
}

// {ptr, len} that the host must refuse to lift (or, for a random pointer, that may lift into random values).
static void garbage_ptr_len(uint8_t *at, uint32_t elem_size, uint32_t align) {
  uint32_t end = mem_end(), heap = (uint32_t)(uintptr_t)&__heap_base;
  switch (below(8)) {
    case 0:  // past the end of memory
      put32(at, end + below(1u << 20)), put32(at + 4, 1 + below(16));
      break;
    case 1:  // starts inside, ends outside
      put32(at, (end - 8) & ~(align - 1)), put32(at + 4, 64);
      break;
    case 2:  // len * size overflows 32 bits
      put32(at, heap), put32(at + 4, elem_size > 1 ? 0xFFFFFFFFu / elem_size + 1 + below(1000) : 0xFFFFFFFFu);
      break;
    case 3:  // unaligned (strings have no alignment to break: past the end instead)
      put32(at, align > 1 ? heap + 1 + below(align - 1) : 0xFFFFFFFFu), put32(at + 4, 1 + below(4));
      break;
    case 4:  // into whatever bytes lie in memory (random ones in random-memory mode), aligned
      put32(at, (heap + below(fill_span())) & ~(align - 1)), put32(at + 4, below(64));
      break;
    case 5:  // an empty list at an impossible address
      put32(at, 0xFFFFFFF8u & ~(align - 1)), put32(at + 4, 0);
      break;
    case 6:  // address 0 is valid memory: a list read from the data segment's start
      put32(at, 0), put32(at + 4, 1 + below(32));
      break;
    default:  // anything at all
      put32(at, (uint32_t)next()), put32(at + 4, (uint32_t)next());
  }
}

// Writes {ptr, len} of a string at `at`.
static void gen_string(uint8_t *at, enum level l, const char *valid) {
  static const char *bad_utf8[] = {
      "\xff",               // never valid
      "\xc0\x80",           // overlong NUL
      "\xed\xa0\x80",       // a surrogate
      "ok then \xe2\x82",   // truncated sequence at the end
      "\xf4\x90\x80\x80",   // above U+10FFFF
      "\x80 continuation",  // continuation byte first
  };
  switch (l) {
    case VALID:
      put32(at, copy_in(valid, strlen(valid), 1)), put32(at + 4, (uint32_t)strlen(valid));
      break;
    case WRONG: {  // valid UTF-8, but empty or long
      uint32_t n = chance(50) ? 0 : 1000 + below(100000);
      uint8_t *p = arena_alloc(n ? n : 1, 1);
      for (uint32_t i = 0; i < n; i++) p[i] = (uint8_t)('a' + i % 26);
      put32(at, (uint32_t)(uintptr_t)p), put32(at + 4, n);
      break;
    }
    case BADENC: {
      const char *b = bad_utf8[below(sizeof bad_utf8 / sizeof *bad_utf8)];
      put32(at, copy_in(b, strlen(b), 1)), put32(at + 4, (uint32_t)strlen(b));
      break;
    }
    default:
      garbage_ptr_len(at, 1, 1);
  }
}

// Writes {ptr, len} of a list<string> of reasons at `at`.
static void gen_reasons(uint8_t *at, enum level l) {
  if (l == GARBAGE && chance(50)) {
    garbage_ptr_len(at, 8, 4);
    return;
  }
  uint32_t n = l == WRONG && chance(40) ? (chance(50) ? 0 : 10000 + below(100000)) : 1 + below(3);
  uint8_t *list = arena_alloc(n * 8 + 1, 4);
  uint32_t bad = below(n), ab = copy_in("ab", 2, 1);  // one element takes the level; a huge list stays valid
  for (uint32_t i = 0; i < n; i++) {
    if (n > 1000) {
      put32(list + i * 8, ab), put32(list + i * 8 + 4, i % 3);
    } else {
      gen_string(list + i * 8, i == bad ? l : VALID, "hostile: reason");
    }
  }
  put32(at, (uint32_t)(uintptr_t)list), put32(at + 4, n);
}

// Status codes in WIT order.
enum { SUCCESS, ERROR, UNSCHEDULABLE, UNRESOLVABLE, WAIT, SKIP, PENDING, NUM_CODES };
#define C(x) (1u << (x))

// Writes a status (12 bytes) at `at`. A valid status takes a code from `expected` (a mask of C(code)); a wrong one
// any code of the enum; a badly encoded one a discriminant past the enum.
static void gen_status(uint8_t *at, uint32_t expected) {
  enum level l = field_level();
  uint8_t code;
  if (l == BADENC && chance(50)) {
    code = (uint8_t)(NUM_CODES + below(256 - NUM_CODES));
    l = VALID;
  } else if (l == WRONG && chance(50)) {
    code = (uint8_t)below(NUM_CODES);
  } else {
    do code = (uint8_t)below(NUM_CODES); while (!(expected & C(code)));
  }
  at[0] = code, at[1] = (uint8_t)next(), at[2] = (uint8_t)next(), at[3] = (uint8_t)next();  // padding: anything
  if (code == SUCCESS && l == VALID) {
    put32(at + 4, 0), put32(at + 8, 0);
  } else {
    gen_reasons(at + 4, l);
  }
}

// An option tag at `at` (valid: 0 or 1; badly encoded: 2..255). Returns true when the payload should be written.
static int gen_option_tag(uint8_t *at, enum level l) {
  if (l == BADENC) {
    at[0] = (uint8_t)(2 + below(254));
    return 1;
  }
  at[0] = (uint8_t)below(2);
  return at[0];
}

// {ptr, len} of a list of `n` 8-byte scores at `at`; VALID scores are in [0, 100].
static void gen_scores(uint8_t *at, uint32_t n, enum level l) {
  if (l == GARBAGE || (l == BADENC && chance(50))) {
    garbage_ptr_len(at, 8, 8);
    return;
  }
  if (l == WRONG && chance(50)) n = chance(50) ? (n ? n - 1 : 1) + below(2) * 2 : below(100000);
  uint8_t *p = arena_alloc(n * 8 + 8, 8);
  if (l == BADENC) p += 4;  // unaligned: s64 lists are 8-aligned
  static const int64_t odd[] = {-1, 101, INT64_MAX, INT64_MIN, 1000, -100};
  for (uint32_t i = 0; i < n; i++) {
    int64_t s = (int64_t)below(101);
    if (l == WRONG && chance(30)) s = odd[below(sizeof odd / sizeof *odd)];
    put64(p + i * 8, (uint64_t)s);
  }
  put32(at, (uint32_t)(uintptr_t)p), put32(at + 4, n);
}

// ---- the return area ----

static __attribute__((__aligned__(8))) uint8_t RET[32];

// Where the answer is: RET, or (garbage) an address the host must refuse.
static uint8_t *ret_ptr(uint32_t align) {
  if (call_level != GARBAGE || !chance(25)) return RET;
  switch (below(4)) {
    case 0:
      return (uint8_t *)(uintptr_t)(mem_end() + 8 * below(1000));
    case 1:
      return (uint8_t *)(uintptr_t)(mem_end() - 4);  // straddles the end
    case 2:
      return align > 1 ? RET + 1 : (uint8_t *)(uintptr_t)0xFFFFFFF0u;
    default:
      return (uint8_t *)(uintptr_t)0xFFFFFFF8u;
  }
}

static uint8_t *status_answer(uint32_t expected) {
  begin_answer();
  memset(RET, 0, sizeof RET);
  gen_status(RET, expected);
  return ret_ptr(4);
}

// Node names a PreFilter or PostFilter answer may name: the tests' nodes n0..n3, and one that does not exist.
static const char *node_name(void) {
  static const char *names[] = {"n0", "n1", "n2", "n3", "no-such-node"};
  return names[below(5)];
}

// ---- exports ----

// nodes.apply and cycle.begin answer nothing: they only take the arguments (the arena is reset by the next call).
__attribute__((__export_name__("kws:plugin/nodes@0.2.1#apply")))
void hostile_apply(uint8_t *changes, size_t len) { (void)changes, (void)len; }

__attribute__((__export_name__("kws:plugin/cycle@0.2.1#begin")))
void hostile_begin(void) {}

// pods.apply takes the pod view and keeps nothing.
__attribute__((__export_name__("kws:plugin/pods@0.2.1#apply")))
void hostile_pods_apply(uint8_t *changes, size_t len) { (void)changes, (void)len; }

// declarations.declare promises nothing in any mode: asked once, at load, like events-to-register, and a promise
// would only take calls away from the garbage the tests want to see. The config's "declare" makes it trap ("trap"),
// set all 32 bits of its answer, the contract's seven flags (two of which exclude each other) and 25 bits it does
// not have ("every-bit"), or all but the five flags of bits 2-6 ("unknown-bits": score-needs-no-normalize,
// ignores-node-usage and the 25 bits). A flags value comes back flat, as an i32.
__attribute__((__export_name__("kws:plugin/declarations@0.2.1#declare")))
int32_t hostile_declare(void) {
  configure();
  if (declare_as == DECLARE_TRAP) __builtin_trap();
  if (declare_as == DECLARE_EVERY_BIT) return -1;
  return declare_as == DECLARE_UNKNOWN_BITS ? (int32_t)~0x7cu : 0;
}

// events.events-to-register answers a valid list in every mode: it is asked once, at load, where a bad answer
// refuses the plugin (the garbage is for the calls that follow). It registers every action on every kind of object,
// so its rejections are retried as a plugin without the interface's. list<cluster-event> comes back through a
// return area {ptr, len}; a cluster-event is {resource: enum u8 @0, actions: flags u8 @1}, 2 bytes, align 1.
__attribute__((__export_name__("kws:plugin/events@0.2.1#events-to-register")))
uint8_t *hostile_events_to_register(void) {
  static uint8_t events[10] = {0, 0x3f, 1, 0x3f, 2, 0x3f, 3, 0x3f, 4, 0x3f};
  static uint32_t area[2];
  area[0] = (uint32_t)(uintptr_t)events, area[1] = 5;
  return (uint8_t *)area;
}

// events.queueing-hint: its parameters flatten past 16 values, so they arrive through one pointer; the enum comes
// back flat, as an i32 (out of range when badly encoded).
__attribute__((__export_name__("kws:plugin/events@0.2.1#queueing-hint")))
int32_t hostile_queueing_hint(uint8_t *args) {
  (void)args;
  begin_answer();
  if (call_level == BADENC || call_level == GARBAGE) return (int32_t)next();
  return (int32_t)below(2);
}

// config.validate answers ok: the fixture accepts any configuration (its garbage is for the points, and a refusal
// would stop it from loading). result<_, string> comes back through a return area: the tag byte, then {ptr, len}.
__attribute__((__export_name__("kws:plugin/config@0.2.1#validate")))
uint8_t *hostile_validate(void) {
  static uint32_t area[3];
  area[0] = 0;
  return (uint8_t *)area;
}

__attribute__((__export_name__("kws:plugin/pre-enqueue@0.2.1#pre-enqueue")))
uint8_t *hostile_pre_enqueue(uint8_t *args) {
  return status_answer(C(SUCCESS) | C(UNSCHEDULABLE) | C(UNRESOLVABLE) | C(PENDING));
}

// A bool comes back flat, as an i32: 0 or 1, or (badly encoded) anything else.
__attribute__((__export_name__("kws:plugin/queue-sort@0.2.1#less")))
int32_t hostile_less(uint8_t *args) {
  begin_answer();
  if (call_level == BADENC || call_level == GARBAGE) return (int32_t)next();
  return (int32_t)below(2);
}

// sort-key: option<list<u8>> through a return area: the tag @0, then {ptr, len} @4. A valid answer is a key of up to
// 16 random bytes, or none; garbage is a bad tag, or a list pointing anywhere.
__attribute__((__export_name__("kws:plugin/queue-sort@0.2.1#sort-key")))
uint8_t *hostile_sort_key(uint8_t *args) {
  (void)args;
  begin_answer();
  memset(RET, 0, sizeof RET);
  enum level l = field_level();
  if (gen_option_tag(RET, l)) {
    if (l == GARBAGE) {
      garbage_ptr_len(RET + 4, 1, 1);
    } else {
      uint32_t n = below(17);
      uint8_t *key = arena_alloc(n + 1, 1);
      for (uint32_t i = 0; i < n; i++) key[i] = (uint8_t)next();
      put32(RET + 4, (uint32_t)(uintptr_t)key), put32(RET + 8, n);
    }
  }
  return ret_ptr(4);
}

// The pod-ref handle a by-reference call lent: read once (valid), or misused in a garbage call: a method called
// on a made-up handle, or the handle kept past the call instead of dropped. Each of those traps the call.
static void use_pod_ref(int32_t pod) {
  if (call_level == GARBAGE && chance(20)) host_pod_ref_priority((int32_t)next());
  if (call_level == GARBAGE && chance(20)) return;
  host_pod_ref_priority(pod);
  host_pod_ref_drop(pod);
}

// sort-key-ref.sort-key: the same answers as sort-key, the pod lent by handle.
__attribute__((__export_name__("kws:plugin/sort-key-ref@0.2.1#sort-key")))
uint8_t *hostile_sort_key_ref(int32_t pod, int64_t timestamp_ns, int32_t attempts) {
  (void)timestamp_ns, (void)attempts;
  uint8_t *ret = hostile_sort_key(NULL);
  use_pod_ref(pod);
  return ret;
}

// pre-filter-result: status @0, node-names: option<list<string>> @12 (tag), @16 (ptr, len). 24 bytes.
__attribute__((__export_name__("kws:plugin/pre-filter@0.2.1#pre-filter")))
uint8_t *hostile_pre_filter(uint8_t *args) {
  begin_answer();
  memset(RET, 0, sizeof RET);
  gen_status(RET, C(SUCCESS) | C(UNSCHEDULABLE) | C(UNRESOLVABLE) | C(SKIP));
  enum level l = field_level();
  if (gen_option_tag(RET + 12, l)) {
    if (l == GARBAGE) {
      garbage_ptr_len(RET + 16, 8, 4);
    } else {
      uint32_t n = l == WRONG ? (chance(50) ? 0 : 5000 + below(5000)) : below(4);
      uint8_t *list = arena_alloc(n * 8 + 1, 4);
      uint32_t bad = below(n);
      for (uint32_t i = 0; i < n; i++) gen_string(list + i * 8, i == bad ? l : VALID, node_name());
      put32(RET + 16, (uint32_t)(uintptr_t)list), put32(RET + 20, n);
    }
  }
  return ret_ptr(4);
}

__attribute__((__export_name__("kws:plugin/pre-filter@0.2.1#add-pod")))
uint8_t *hostile_add_pod(uint8_t *args) { return status_answer(C(SUCCESS) | C(ERROR)); }

__attribute__((__export_name__("kws:plugin/pre-filter@0.2.1#remove-pod")))
uint8_t *hostile_remove_pod(uint8_t *args) { return status_answer(C(SUCCESS) | C(ERROR)); }

// filter-result: statuses @0, rejected @8, verdicts @16 (each ptr, len). 24 bytes.
__attribute__((__export_name__("kws:plugin/filter@0.2.1#filter")))
uint8_t *hostile_filter(uint8_t *slots, size_t nodes) {
  (void)slots;
  uint32_t n = (uint32_t)nodes;  // read before the arena is reset
  begin_answer();
  memset(RET, 0, sizeof RET);
  // statuses: 1-3 rejections (a wrong answer may slip a success in)
  enum level l = field_level();
  if (l == GARBAGE) {
    garbage_ptr_len(RET, 12, 4);
  } else {
    uint32_t k = 1 + below(3);
    uint8_t *st = arena_alloc(k * 12, 4);
    for (uint32_t i = 0; i < k; i++) {
      gen_status(st + i * 12, C(UNSCHEDULABLE) | C(UNRESOLVABLE) | C(ERROR));
      if (l == WRONG && i == k - 1 && chance(30)) st[i * 12] = SUCCESS;
    }
    put32(RET, (uint32_t)(uintptr_t)st), put32(RET + 4, k);
  }
  uint32_t k = RET[4] | RET[5] << 8 | RET[6] << 16 | (uint32_t)RET[7] << 24;
  // rejected positions, each once; verdicts: an index into statuses for each
  l = field_level();
  if (l == GARBAGE) {
    garbage_ptr_len(RET + 8, 4, 4);
    garbage_ptr_len(RET + 16, 4, 4);
  } else {
    uint32_t *rej = arena_alloc(n * 4 + 8, 4), *ver = arena_alloc(n * 4 + 8, 4), count = 0;
    for (uint32_t i = 0; i < n; i++) {
      if (chance(50)) rej[count] = i, ver[count] = below(k ? k : 1), count++;
    }
    uint32_t vcount = count;
    if (l == WRONG) {
      switch (below(4)) {
        case 0: rej[count] = n + below(10), ver[count] = 0, count++, vcount++; break;  // past the batch
        case 1: if (count) rej[count] = rej[0], ver[count] = 0, count++, vcount++; break;  // twice
        case 2: if (count) ver[0] = k + below(10); break;  // no such status
        default: vcount = count + 1 + below(2), ver[count] = ver[count + 1] = 0;  // lengths disagree
      }
    }
    if (l == BADENC) rej = (uint32_t *)((uint8_t *)rej + 2);  // unaligned u32 list
    put32(RET + 8, (uint32_t)(uintptr_t)rej), put32(RET + 12, count);
    put32(RET + 16, (uint32_t)(uintptr_t)ver), put32(RET + 20, vcount);
  }
  return ret_ptr(4);
}

// post-filter-result: status @0, nominated-node: option<string> @12 (tag), @16 (ptr, len). 24 bytes.
__attribute__((__export_name__("kws:plugin/post-filter@0.2.1#post-filter")))
uint8_t *hostile_post_filter(uint8_t *args) {
  begin_answer();
  memset(RET, 0, sizeof RET);
  gen_status(RET, C(SUCCESS) | C(UNSCHEDULABLE) | C(UNRESOLVABLE));
  enum level l = field_level();
  if (gen_option_tag(RET + 12, l)) gen_string(RET + 16, l, node_name());
  return ret_ptr(4);
}

__attribute__((__export_name__("kws:plugin/pre-score@0.2.1#pre-score")))
uint8_t *hostile_pre_score(uint8_t *args) { return status_answer(C(SUCCESS) | C(SKIP)); }

// result<list<s64>, status>: tag @0; ok: list @4 (ptr, len); err: status @4. 16 bytes.
static uint8_t *scores_answer(uint32_t n) {
  begin_answer();
  memset(RET, 0, sizeof RET);
  enum level l = field_level();
  if (l == BADENC && chance(30)) {
    RET[0] = (uint8_t)(2 + below(254));
    gen_scores(RET + 4, n, VALID);
  } else if (chance(85)) {
    RET[0] = 0;
    gen_scores(RET + 4, n, l);
  } else {
    RET[0] = 1;
    gen_status(RET + 4, C(ERROR));
  }
  return ret_ptr(4);
}

__attribute__((__export_name__("kws:plugin/score@0.2.1#score")))
uint8_t *hostile_score(uint8_t *slots, size_t nodes) { return scores_answer((uint32_t)nodes); }

__attribute__((__export_name__("kws:plugin/score@0.2.1#normalize-score")))
uint8_t *hostile_normalize_score(uint8_t *slots, size_t nodes, uint8_t *scores, size_t n) {
  return scores_answer((uint32_t)n);
}

__attribute__((__export_name__("kws:plugin/reserve@0.2.1#reserve")))
uint8_t *hostile_reserve(uint8_t *args) { return status_answer(C(SUCCESS) | C(UNSCHEDULABLE)); }

__attribute__((__export_name__("kws:plugin/reserve@0.2.1#unreserve")))
void hostile_unreserve(uint8_t *args) { begin_answer(); }

// permit-result: status @0, timeout-ms: u64 @16. 24 bytes, align 8.
__attribute__((__export_name__("kws:plugin/permit@0.2.1#permit")))
uint8_t *hostile_permit(uint8_t *args) {
  begin_answer();
  memset(RET, 0, sizeof RET);
  gen_status(RET, C(SUCCESS) | C(UNSCHEDULABLE) | C(WAIT));
  // Valid: no wait, or a short one; wrong: the longest wait u64 can say (the host caps it at 15 minutes).
  uint64_t ms = RET[0] == WAIT ? below(50) : 0;
  if (field_level() == WRONG) ms = chance(50) ? UINT64_MAX : next();
  if (ms > max_wait_ms) ms = max_wait_ms;
  put64(RET + 16, ms);
  return ret_ptr(8);
}

__attribute__((__export_name__("kws:plugin/pre-bind@0.2.1#pre-bind")))
uint8_t *hostile_pre_bind(uint8_t *args) { return status_answer(C(SUCCESS) | C(UNSCHEDULABLE)); }

__attribute__((__export_name__("kws:plugin/bind@0.2.1#bind")))
uint8_t *hostile_bind(uint8_t *args) { return status_answer(C(SUCCESS) | C(SKIP) | C(ERROR)); }

__attribute__((__export_name__("kws:plugin/post-bind@0.2.1#post-bind")))
void hostile_post_bind(uint8_t *args) { begin_answer(); }

__attribute__((__export_name__("kws:plugin/post-bind-ref@0.2.1#post-bind")))
void hostile_post_bind_ref(int32_t pod, uint8_t *node, size_t len) {
  (void)node, (void)len;
  begin_answer();
  use_pod_ref(pod);
}
