;; The `wasi_snapshot_preview1` functions the Go runtime (GOOS=wasip1) imports, implemented with the contract's
;; own host imports: `plugin componentize` gives this module to wit-component as the adapter of a Go guest.
;;
;; Why not wasmtime's preview1 adapter: it allocates its state and stack on first use, through the main module's
;; `cabi_realloc` or `memory.grow`. Go's runtime makes its first WASI calls from `_initialize`, before a
;; //go:wasmexport function (such as `cabi_realloc`) may be entered, and its heap assumes it owns every page
;; above its data (runtime/mem_wasm.go grows memory from its own break and ignores pages grown by others), so
;; both ways corrupt memory. This adapter needs no memory of its own: each function reads and writes only the
;; buffers the caller passes, so a Go guest imports nothing but kws:plugin/host.
;;
;; What a plugin gets: no arguments, no environment, no files or preopened directories (EBADF); stdout and
;; stderr go to the scheduler's log through host.log (info and warn), one line per write; random bytes from
;; host.random (seeded in the simulator, so runs repeat); both clocks from host.now-ns, the monotonic one never
;; going backwards; poll_oneoff returns at once with no event (a guest that sleeps spins until the call's
;; deadline); proc_exit traps.
;;
;; While the host runs the guest's `cabi_realloc` or a post-return function, the component model forbids calls
;; out of the component ("cannot leave component instance"), yet Go's allocator reads the clock (and could print
;; a crash). The Go SDK brackets those functions with `kws_cannot_leave(1)` / `kws_cannot_leave(0)`; meanwhile
;; the clocks answer the last time read and output is dropped.
(module
  (import "env" "memory" (memory 0))
  (import "kws:plugin/host@0.2.1" "log" (func $log (param i32 i32 i32)))
  (import "kws:plugin/host@0.2.1" "random" (func $random (result i64)))
  (import "kws:plugin/host@0.2.1" "now-ns" (func $now (result i64)))

  ;; The last time handed out by each clock.
  (global $monotonic (mut i64) (i64.const 0))
  (global $realtime (mut i64) (i64.const 0))
  ;; Set while the guest may not call the host (see above).
  (global $cannot_leave (mut i32) (i32.const 0))

  (func (export "kws_cannot_leave") (param $on i32)
    (global.set $cannot_leave (local.get $on)))

  (func (export "args_sizes_get") (param $count i32) (param $bytes i32) (result i32)
    (i32.store (local.get $count) (i32.const 0))
    (i32.store (local.get $bytes) (i32.const 0))
    (i32.const 0))
  (func (export "args_get") (param i32 i32) (result i32)
    (i32.const 0))
  (func (export "environ_sizes_get") (param $count i32) (param $bytes i32) (result i32)
    (i32.store (local.get $count) (i32.const 0))
    (i32.store (local.get $bytes) (i32.const 0))
    (i32.const 0))
  (func (export "environ_get") (param i32 i32) (result i32)
    (i32.const 0))

  ;; Clock 0 is the realtime clock, every other one is treated as monotonic.
  (func (export "clock_time_get") (param $clock i32) (param $precision i64) (param $out i32) (result i32)
    (local $t i64)
    (if (global.get $cannot_leave)
      (then
        (i64.store (local.get $out)
          (select (global.get $realtime) (global.get $monotonic) (i32.eqz (local.get $clock))))
        (return (i32.const 0))))
    (local.set $t (call $now))
    (if (i32.eqz (local.get $clock))
      (then (global.set $realtime (local.get $t)))
      (else
        (if (i64.lt_u (local.get $t) (global.get $monotonic))
          (then (local.set $t (global.get $monotonic))))
        (global.set $monotonic (local.get $t))))
    (i64.store (local.get $out) (local.get $t))
    (i32.const 0))

  (func (export "random_get") (param $buf i32) (param $len i32) (result i32)
    (local $v i64)
    (block $done
      (loop $words
        (br_if $done (i32.lt_u (local.get $len) (i32.const 8)))
        (i64.store (local.get $buf) (call $random))
        (local.set $buf (i32.add (local.get $buf) (i32.const 8)))
        (local.set $len (i32.sub (local.get $len) (i32.const 8)))
        (br $words)))
    (if (i32.gt_u (local.get $len) (i32.const 0))
      (then
        (local.set $v (call $random))
        (loop $bytes
          (i64.store8 (local.get $buf) (local.get $v))
          (local.set $v (i64.shr_u (local.get $v) (i64.const 8)))
          (local.set $buf (i32.add (local.get $buf) (i32.const 1)))
          (local.set $len (i32.sub (local.get $len) (i32.const 1)))
          (br_if $bytes (i32.gt_u (local.get $len) (i32.const 0))))))
    (i32.const 0))

  ;; stdout (1) at level info, stderr (2) at level warn; any other descriptor is EBADF (8).
  (func (export "fd_write") (param $fd i32) (param $iovs i32) (param $n i32) (param $written i32) (result i32)
    (local $level i32) (local $ptr i32) (local $len i32) (local $total i32)
    (if (i32.eq (local.get $fd) (i32.const 1)) (then (local.set $level (i32.const 1)))
      (else
        (if (i32.eq (local.get $fd) (i32.const 2)) (then (local.set $level (i32.const 2)))
          (else (return (i32.const 8))))))
    (block $done
      (loop $each
        (br_if $done (i32.eqz (local.get $n)))
        (local.set $ptr (i32.load (local.get $iovs)))
        (local.set $len (i32.load offset=4 (local.get $iovs)))
        (if (i32.and (i32.gt_u (local.get $len) (i32.const 0)) (i32.eqz (global.get $cannot_leave)))
          (then (call $log (local.get $level) (local.get $ptr) (local.get $len))))
        (local.set $total (i32.add (local.get $total) (local.get $len)))
        (local.set $iovs (i32.add (local.get $iovs) (i32.const 8)))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $each)))
    (i32.store (local.get $written) (local.get $total))
    (i32.const 0))

  ;; No event: the caller's sleep or poll returns at once.
  (func (export "poll_oneoff") (param i32 i32 i32) (param $events i32) (result i32)
    (i32.store (local.get $events) (i32.const 0))
    (i32.const 0))

  (func (export "sched_yield") (result i32)
    (i32.const 0))
  (func (export "proc_exit") (param i32)
    unreachable)

  ;; stdin, stdout and stderr are character devices with every right; nothing else is open (EBADF).
  (func (export "fd_fdstat_get") (param $fd i32) (param $buf i32) (result i32)
    (if (i32.gt_u (local.get $fd) (i32.const 2)) (then (return (i32.const 8))))
    (i32.store8 (local.get $buf) (i32.const 2))
    (i32.store16 offset=2 (local.get $buf) (i32.const 0))
    (i64.store offset=8 (local.get $buf) (i64.const -1))
    (i64.store offset=16 (local.get $buf) (i64.const 0))
    (i32.const 0))
  (func (export "fd_fdstat_set_flags") (param $fd i32) (param i32) (result i32)
    (if (result i32) (i32.gt_u (local.get $fd) (i32.const 2)) (then (i32.const 8)) (else (i32.const 0))))
  (func (export "fd_close") (param i32) (result i32)
    (i32.const 8))
  ;; No preopened directories: the Go runtime's search for them ends at the first EBADF.
  (func (export "fd_prestat_get") (param i32 i32) (result i32)
    (i32.const 8))
  (func (export "fd_prestat_dir_name") (param i32 i32 i32) (result i32)
    (i32.const 8))
)
