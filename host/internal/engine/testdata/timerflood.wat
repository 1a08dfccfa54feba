;; timerflood: a processing-time timer flood (host/neighbour_test.go). Every
;; record sets 5,000 processing-time timers due at once (time 0, keys the
;; 4-byte counter round * 5000 + i); each firing returns at once. Results of
;; timer_set are ignored: past limits.timers the host refuses with ELIMIT.
(module
  (import "wasmstream" "timer_set" (func $timer_set (param i32 i64 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (global $round (mut i32) (i32.const 0))
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param $n i32) (result i32)
    (if (i32.gt_u (local.get $n) (i32.const 65536)) (then (return (i32.const 0))))
    (i32.const 1024))
  (func (export "wasmstream_process") (param $n i32) (result i32)
    (local $i i32)
    (global.set $round (i32.add (global.get $round) (i32.const 1)))
    (loop $set
      (i32.store (i32.const 100) (i32.add (i32.mul (global.get $round) (i32.const 5000)) (local.get $i)))
      (drop (call $timer_set (i32.const 1) (i64.const 0) (i32.const 100) (i32.const 4)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $set (i32.lt_u (local.get $i) (i32.const 5000))))
    (i32.const 0))
  (func (export "wasmstream_on_timer") (param $n i32) (result i32)
    (i32.const 0))
)
