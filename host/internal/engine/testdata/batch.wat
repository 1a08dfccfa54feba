;; batch: speaks ABI versions 1 and 2 (abi/ABI.md section 10) and runs
;; each record's value as a program of 8-byte commands (u32 op, u32 a),
;; the same way through wasmstream_process and through wasmstream_batch,
;; except where an op is about the batch itself:
;;   1 put: state_put(store 0, the record's key, a as 4 bytes)
;;   2 emit: emit to output 0 a record with the input's key and value a
;;      (4 bytes): staged in the batch's arena, or with the emit import
;;   3 get: state_get(store 0, key) and emit its 4 bytes (ffffffff: missing)
;;   4 fail: set_error("failed") and return FAILED
;;   5 trap   6 spin forever   7 return status a
;;   8 (batch) write a into the batch's done count and go on
;;   9 (batch) return from wasmstream_batch at once, this call unfinished
;;  10 (batch) give this call's staged emits as [a, a+100)
;;  11 emit to output a with the emit import (any mode)
;;  12 (batch) from now on, ignore failures and the stop word
;;  13 (batch) stage an emit entry whose length runs past the arena's run
;;  14 loop a million times without a host call
;; A trigger (slot kind 1, or on_timer/on_commit) emits its own bytes as
;; the value. The input buffer is at 65536 (up to 1 MiB); staged emits go
;; to an arena at 1572864, reset per batch.
(module
  (import "wasmstream" "emit" (func $emit (param i32 i32) (result i32)))
  (import "wasmstream" "set_error" (func $set_error (param i32 i32) (result i32)))
  (import "wasmstream" "state_get" (func $state_get (param i32 i32 i32 i32 i32) (result i32)))
  (import "wasmstream" "state_put" (func $state_put (param i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 32)
  (data (i32.const 16) "failed")
  (global $staged (mut i32) (i32.const 0))   ;; 1 inside wasmstream_batch
  (global $arena (mut i32) (i32.const 1572864))
  (global $early (mut i32) (i32.const 0))    ;; op 9 asked to return
  (global $badout (mut i32) (i32.const -1))  ;; op 10's a
  (global $badentry (mut i32) (i32.const 0)) ;; op 13 seen
  (global $reckless (mut i32) (i32.const 0)) ;; op 12 seen
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_abi_version_2"))
  (func (export "wasmstream_input") (param $n i32) (result i32)
    (if (i32.gt_u (local.get $n) (i32.const 1048576)) (then (return (i32.const 0))))
    (i32.const 65536))

  ;; out emits (or stages) a record on output $idx: key [kp, kp+kl) (kl -1:
  ;; null), value [vp, vp+vl), built at 40000 for a direct emit.
  (func $out (param $idx i32) (param $kp i32) (param $kl i32) (param $vp i32) (param $vl i32)
    (local $p i32) (local $k i32) (local $n i32)
    (local.set $k (select (i32.const 0) (local.get $kl) (i32.lt_s (local.get $kl) (i32.const 0))))
    (local.set $n (i32.add (i32.const 36) (i32.add (local.get $k) (local.get $vl))))
    (local.set $p (i32.const 40000))
    (if (global.get $staged)
      (then
        (i32.store (global.get $arena) (local.get $n))
        (local.set $p (i32.add (global.get $arena) (i32.const 4)))
        (global.set $arena (i32.add (local.get $p) (local.get $n)))))
    (i64.store (local.get $p) (i64.const 0))
    (i64.store offset=8 (local.get $p) (i64.const -1))
    (i32.store offset=16 (local.get $p) (i32.const -1))
    (i32.store offset=20 (local.get $p) (local.get $idx))
    (i32.store offset=24 (local.get $p) (local.get $kl))
    (i32.store offset=28 (local.get $p) (local.get $vl))
    (i32.store offset=32 (local.get $p) (i32.const 0))
    (memory.copy (i32.add (local.get $p) (i32.const 36)) (local.get $kp) (local.get $k))
    (memory.copy (i32.add (local.get $p) (i32.add (i32.const 36) (local.get $k))) (local.get $vp) (local.get $vl))
    (if (i32.eqz (global.get $staged))
      (then (drop (call $emit (local.get $p) (local.get $n))))))

  ;; exec runs the record at [r, r+n) and returns its status.
  (func $exec (param $r i32) (param $n i32) (result i32)
    (local $kl i32) (local $k i32) (local $p i32) (local $end i32) (local $op i32) (local $a i32)
    (local.set $kl (i32.load offset=24 (local.get $r)))
    (local.set $k (select (i32.const 0) (local.get $kl) (i32.lt_s (local.get $kl) (i32.const 0))))
    (local.set $p (i32.add (i32.add (local.get $r) (i32.const 36)) (local.get $k)))
    (local.set $end (i32.add (local.get $p) (i32.load offset=28 (local.get $r))))
    (block $done
      (loop $next
        (br_if $done (i32.gt_u (i32.add (local.get $p) (i32.const 8)) (local.get $end)))
        (local.set $op (i32.load (local.get $p)))
        (local.set $a (i32.load offset=4 (local.get $p)))
        (i32.store (i32.const 39000) (local.get $a))
        (if (i32.eq (local.get $op) (i32.const 1))
          (then (drop (call $state_put (i32.const 0) (i32.add (local.get $r) (i32.const 36)) (local.get $k) (i32.const 39000) (i32.const 4)))))
        (if (i32.eq (local.get $op) (i32.const 2))
          (then (call $out (i32.const 0) (i32.add (local.get $r) (i32.const 36)) (local.get $kl) (i32.const 39000) (i32.const 4))))
        (if (i32.eq (local.get $op) (i32.const 3))
          (then
            (i32.store (i32.const 39000) (i32.const -1))
            (drop (call $state_get (i32.const 0) (i32.add (local.get $r) (i32.const 36)) (local.get $k) (i32.const 39000) (i32.const 4)))
            (call $out (i32.const 0) (i32.add (local.get $r) (i32.const 36)) (local.get $kl) (i32.const 39000) (i32.const 4))))
        (if (i32.eq (local.get $op) (i32.const 4))
          (then
            (drop (call $set_error (i32.const 16) (i32.const 6)))
            (return (i32.const 1))))
        (if (i32.eq (local.get $op) (i32.const 5)) (then (unreachable)))
        (if (i32.eq (local.get $op) (i32.const 6)) (then (loop $spin (br $spin))))
        (if (i32.eq (local.get $op) (i32.const 7)) (then (return (local.get $a))))
        (if (i32.eq (local.get $op) (i32.const 8))
          (then (if (global.get $staged) (then (i32.store (i32.const 65540) (local.get $a))))))
        (if (i32.eq (local.get $op) (i32.const 9))
          (then (if (global.get $staged) (then (global.set $early (i32.const 1)) (return (i32.const 0))))))
        (if (i32.eq (local.get $op) (i32.const 10)) (then (global.set $badout (local.get $a))))
        (if (i32.eq (local.get $op) (i32.const 11))
          (then
            (local.set $op (global.get $staged))
            (global.set $staged (i32.const 0))
            (call $out (local.get $a) (i32.add (local.get $r) (i32.const 36)) (local.get $kl) (i32.const 39000) (i32.const 4))
            (global.set $staged (local.get $op))))
        (if (i32.eq (local.get $op) (i32.const 12)) (then (global.set $reckless (i32.const 1))))
        (if (i32.eq (local.get $op) (i32.const 13)) (then (global.set $badentry (i32.const 1))))
        (if (i32.eq (local.get $op) (i32.const 14))
          (then
            (local.set $a (i32.mul (local.get $a) (i32.const 1000000)))
            (block $busy (loop $again
              (br_if $busy (i32.eqz (local.get $a)))
              (local.set $a (i32.sub (local.get $a) (i32.const 1)))
              (br $again)))))
        (local.set $p (i32.add (local.get $p) (i32.const 8)))
        (br $next)))
    (i32.const 0))

  ;; trigger emits the trigger [t, t+n) as the value of a record with a null key.
  (func $trigger (param $t i32) (param $n i32) (result i32)
    (call $out (i32.const 0) (i32.const 0) (i32.const -1) (local.get $t) (local.get $n))
    (i32.const 0))

  (func (export "wasmstream_process") (param $n i32) (result i32)
    (call $exec (i32.const 65536) (local.get $n)))
  (func (export "wasmstream_on_timer") (param $n i32) (result i32)
    (call $trigger (i32.const 65536) (local.get $n)))
  (func (export "wasmstream_on_commit") (param $n i32) (result i32)
    (call $trigger (i32.const 65536) (local.get $n)))

  (func (export "wasmstream_batch") (param $len i32) (result i32)
    (local $count i32) (local $i i32) (local $s i32) (local $plen i32) (local $start i32) (local $st i32)
    (local.set $count (i32.load (i32.const 65536)))
    (local.set $s (i32.const 65552))
    (global.set $staged (i32.const 1))
    (global.set $arena (i32.const 1572864))
    (block $out
      (loop $slot
        (br_if $out (i32.ge_u (local.get $i) (local.get $count)))
        (local.set $plen (i32.load offset=20 (local.get $s)))
        (local.set $start (global.get $arena))
        (global.set $badout (i32.const -1))
        (global.set $badentry (i32.const 0))
        (if (i32.load (local.get $s))
          (then (local.set $st (call $trigger (i32.add (local.get $s) (i32.const 24)) (local.get $plen))))
          (else (local.set $st (call $exec (i32.add (local.get $s) (i32.const 24)) (local.get $plen)))))
        (if (global.get $early) (then (global.set $early (i32.const 0)) (br $out)))
        (i32.store offset=4 (local.get $s) (local.get $st))
        (i32.store offset=8 (local.get $s) (local.get $start))
        (i32.store offset=12 (local.get $s) (i32.sub (global.get $arena) (local.get $start)))
        (if (i32.ge_s (global.get $badout) (i32.const 0))
          (then
            (i32.store offset=8 (local.get $s) (global.get $badout))
            (i32.store offset=12 (local.get $s) (i32.const 100))))
        (if (global.get $badentry)
          (then
            (i32.store (global.get $arena) (i32.const 1000))
            (global.set $arena (i32.add (global.get $arena) (i32.const 8)))
            (i32.store offset=12 (local.get $s) (i32.sub (global.get $arena) (local.get $start)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        ;; done moves to i unless op 8 wrote it (then it stays as written)
        (if (i32.eq (i32.load (i32.const 65540)) (i32.sub (local.get $i) (i32.const 1)))
          (then (i32.store (i32.const 65540) (local.get $i))))
        (if (i32.eqz (global.get $reckless))
          (then
            (br_if $out (local.get $st))
            (br_if $out (i32.load (i32.const 65544)))))
        (local.set $s (i32.add (local.get $s) (i32.and (i32.add (i32.add (local.get $plen) (i32.const 24)) (i32.const 7)) (i32.const -8))))
        (br $slot)))
    (global.set $staged (i32.const 0))
    (i32.const 0))
)
