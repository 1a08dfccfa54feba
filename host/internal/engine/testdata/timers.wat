;; timers: drives the time imports (abi/ABI.md section 8) from the test.
;; A record's value is a program of 24-byte commands, each
;;   u32 op, u32 a, i64 ts, u32 key_ptr, u32 key_len
;; (key_ptr absolute: the value starts at 1060 for a record with a null
;; key). Each call op reports its result with one emit on output 0 whose
;; value is the result as an 8-byte little-endian i64:
;;   1 timer_set(a, ts, key)    2 timer_cancel(a, ts, key)
;;   3 time_now(a)              4 commit_mark(key)
;; and the control ops:
;;   5 set_error("failed") and return FAILED    6 trap (unreachable)
;;   7 spin forever                               9 return status a
;;  10 keep the rest of the value (at 50000) as the program the callbacks
;;     run, and stop
;;  11 report the results of wasmstream_init's four calls (32 bytes:
;;     timer_set, timer_cancel, time_now, commit_mark, each an i64)
;; wasmstream_on_timer and wasmstream_on_commit first emit the trigger
;; bytes they got (value = the input buffer's len bytes), then run the
;; kept program. The input buffer is 32 KiB at 1024.
(module
  (import "wasmstream" "emit" (func $emit (param i32 i32) (result i32)))
  (import "wasmstream" "set_error" (func $set_error (param i32 i32) (result i32)))
  (import "wasmstream" "timer_set" (func $timer_set (param i32 i64 i32 i32) (result i32)))
  (import "wasmstream" "timer_cancel" (func $timer_cancel (param i32 i64 i32 i32) (result i32)))
  (import "wasmstream" "time_now" (func $time_now (param i32) (result i64)))
  (import "wasmstream" "commit_mark" (func $commit_mark (param i32 i32) (result i32)))
  (memory (export "memory") 2)
  (data (i32.const 16) "failed")
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param $n i32) (result i32)
    (if (i32.gt_u (local.get $n) (i32.const 32768)) (then (return (i32.const 0))))
    (i32.const 1024))
  (func (export "wasmstream_init") (result i32)
    (i64.store (i32.const 48000) (i64.extend_i32_s (call $timer_set (i32.const 0) (i64.const 5) (i32.const 16) (i32.const 0))))
    (i64.store (i32.const 48008) (i64.extend_i32_s (call $timer_cancel (i32.const 0) (i64.const 5) (i32.const 16) (i32.const 0))))
    (i64.store (i32.const 48016) (call $time_now (i32.const 0)))
    (i64.store (i32.const 48024) (i64.extend_i32_s (call $commit_mark (i32.const 16) (i32.const 0))))
    (i32.const 0))
  ;; report emits a record on output 0 with value [ptr, ptr+len), built at 40000.
  (func $report (param $ptr i32) (param $len i32)
    (i64.store (i32.const 40000) (i64.const 0))
    (i64.store (i32.const 40008) (i64.const -1))
    (i32.store (i32.const 40016) (i32.const -1))
    (i32.store (i32.const 40020) (i32.const 0))
    (i32.store (i32.const 40024) (i32.const -1))
    (i32.store (i32.const 40028) (local.get $len))
    (i32.store (i32.const 40032) (i32.const 0))
    (memory.copy (i32.const 40036) (local.get $ptr) (local.get $len))
    (drop (call $emit (i32.const 40000) (i32.add (i32.const 36) (local.get $len)))))
  (func $result (param $v i64)
    (i64.store (i32.const 39992) (local.get $v))
    (call $report (i32.const 39992) (i32.const 8)))
  ;; run interprets the program [p, p+n) and returns the call's status.
  (func $run (param $p i32) (param $n i32) (result i32)
    (local $op i32) (local $a i32) (local $ts i64) (local $kp i32) (local $kl i32)
    (block $done
      (loop $next
        (br_if $done (i32.lt_u (local.get $n) (i32.const 24)))
        (local.set $op (i32.load (local.get $p)))
        (local.set $a (i32.load offset=4 (local.get $p)))
        (local.set $ts (i64.load offset=8 (local.get $p)))
        (local.set $kp (i32.load offset=16 (local.get $p)))
        (local.set $kl (i32.load offset=20 (local.get $p)))
        (if (i32.eq (local.get $op) (i32.const 1))
          (then (call $result (i64.extend_i32_s (call $timer_set (local.get $a) (local.get $ts) (local.get $kp) (local.get $kl))))))
        (if (i32.eq (local.get $op) (i32.const 2))
          (then (call $result (i64.extend_i32_s (call $timer_cancel (local.get $a) (local.get $ts) (local.get $kp) (local.get $kl))))))
        (if (i32.eq (local.get $op) (i32.const 3))
          (then (call $result (call $time_now (local.get $a)))))
        (if (i32.eq (local.get $op) (i32.const 4))
          (then (call $result (i64.extend_i32_s (call $commit_mark (local.get $kp) (local.get $kl))))))
        (if (i32.eq (local.get $op) (i32.const 5))
          (then
            (drop (call $set_error (i32.const 16) (i32.const 6)))
            (return (i32.const 1))))
        (if (i32.eq (local.get $op) (i32.const 6)) (then (unreachable)))
        (if (i32.eq (local.get $op) (i32.const 7)) (then (loop $spin (br $spin))))
        (if (i32.eq (local.get $op) (i32.const 9)) (then (return (local.get $a))))
        (if (i32.eq (local.get $op) (i32.const 10))
          (then
            (i32.store (i32.const 49996) (i32.sub (local.get $n) (i32.const 24)))
            (memory.copy (i32.const 50000) (i32.add (local.get $p) (i32.const 24)) (i32.sub (local.get $n) (i32.const 24)))
            (return (i32.const 0))))
        (if (i32.eq (local.get $op) (i32.const 11))
          (then (call $report (i32.const 48000) (i32.const 32))))
        (local.set $p (i32.add (local.get $p) (i32.const 24)))
        (local.set $n (i32.sub (local.get $n) (i32.const 24)))
        (br $next)))
    (i32.const 0))
  (func (export "wasmstream_process") (param $len i32) (result i32)
    (local $kl i32) (local $vl i32)
    (local.set $kl (i32.load (i32.const 1048)))
    (if (i32.lt_s (local.get $kl) (i32.const 0)) (then (local.set $kl (i32.const 0))))
    (local.set $vl (i32.load (i32.const 1052)))
    (if (i32.lt_s (local.get $vl) (i32.const 0)) (then (local.set $vl (i32.const 0))))
    (call $run (i32.add (i32.const 1060) (local.get $kl)) (local.get $vl)))
  (func (export "wasmstream_on_timer") (param $len i32) (result i32)
    (call $report (i32.const 1024) (local.get $len))
    (call $run (i32.const 50000) (i32.load (i32.const 49996))))
  (func (export "wasmstream_on_commit") (param $len i32) (result i32)
    (call $report (i32.const 1024) (local.get $len))
    (call $run (i32.const 50000) (i32.load (i32.const 49996)))))
