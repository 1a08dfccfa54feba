;; stateops: one state operation per record, chosen by the 4-byte key, on
;; store 0. Each reports with one emitted record on output 0 whose partition
;; is the host call's result and whose value is what it read (null if none):
;;   "put_" state_put("k1", record value)
;;   "get_" state_get("k1") with a 4-byte buffer, again with the size if it
;;          did not fit; value = the bytes
;;   "miss" state_get("nokey")
;;   "del_" state_delete("k1")
;;   "big_" state_put("k1", 1 MiB + 1 bytes)          (ETOOLARGE)
;;   "bigk" state_put(4097-byte key, "v")              (ETOOLARGE)
;;   "scan" scan from "a" (no end): one record per entry, value = the raw
;;          scan entry, read with a 16-byte buffer and retried when larger
;;   "leak" opens 17 cursors and closes none; reports the 17th result
;;   "sto9" state_get on store 9 (ENOSTORE)
;;   "curs" scan_next on cursor 99 (ENOCURSOR)
;; Its input buffer holds at most 30000 bytes (not a power of two, so the
;; host's first, rounded-up request for a larger record is refused).
(module
  (import "wasmstream" "emit" (func $emit (param i32 i32) (result i32)))
  (import "wasmstream" "state_get" (func $get (param i32 i32 i32 i32 i32) (result i32)))
  (import "wasmstream" "state_put" (func $put (param i32 i32 i32 i32 i32) (result i32)))
  (import "wasmstream" "state_delete" (func $del (param i32 i32 i32) (result i32)))
  (import "wasmstream" "scan_open" (func $scan_open (param i32 i32 i32 i32 i32) (result i32)))
  (import "wasmstream" "scan_next" (func $scan_next (param i32 i32 i32) (result i32)))
  (import "wasmstream" "scan_close" (func $scan_close (param i32) (result i32)))
  (memory (export "memory") 2)
  (data (i32.const 16) "k1")
  (data (i32.const 32) "nokey")
  (data (i32.const 48) "a")
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param $n i32) (result i32)
    (if (i32.gt_u (local.get $n) (i32.const 30000)) (then (return (i32.const 0))))
    (i32.const 1024))
  ;; report emits a record with partition = code and value = [ptr, ptr+len)
  ;; (null when len < 0), built at 40000.
  (func $report (param $code i32) (param $ptr i32) (param $len i32)
    (i64.store (i32.const 40000) (i64.const 0))
    (i64.store (i32.const 40008) (i64.const -1))
    (i32.store (i32.const 40016) (local.get $code))
    (i32.store (i32.const 40020) (i32.const 0))
    (i32.store (i32.const 40024) (i32.const -1))
    (i32.store (i32.const 40028) (local.get $len))
    (i32.store (i32.const 40032) (i32.const 0))
    (if (i32.lt_s (local.get $len) (i32.const 0)) (then (local.set $len (i32.const 0))))
    (memory.copy (i32.const 40036) (local.get $ptr) (local.get $len))
    (drop (call $emit (i32.const 40000) (i32.add (i32.const 36) (local.get $len)))))
  (func (export "wasmstream_process") (param $n i32) (result i32)
    (local $k i32) (local $r i32) (local $c i32) (local $i i32)
    (if (i32.ne (i32.load (i32.const 1048)) (i32.const 4)) (then (return (i32.const 1))))
    (local.set $k (i32.load (i32.const 1060)))
    (if (i32.eq (local.get $k) (i32.const 0x5f747570)) ;; "put_"
      (then
        (call $report
          (call $put (i32.const 0) (i32.const 16) (i32.const 2) (i32.const 1064) (i32.load (i32.const 1052)))
          (i32.const 0) (i32.const -1))
        (return (i32.const 0))))
    (if (i32.eq (local.get $k) (i32.const 0x5f746567)) ;; "get_"
      (then
        (local.set $r (call $get (i32.const 0) (i32.const 16) (i32.const 2) (i32.const 80000) (i32.const 4)))
        (if (i32.lt_s (local.get $r) (i32.const 0))
          (then (call $report (local.get $r) (i32.const 0) (i32.const -1)) (return (i32.const 0))))
        (local.set $c (local.get $r))
        (if (i32.gt_s (local.get $r) (i32.const 4))
          (then (local.set $c (call $get (i32.const 0) (i32.const 16) (i32.const 2) (i32.const 80000) (local.get $r)))))
        (call $report (local.get $r) (i32.const 80000) (local.get $c))
        (return (i32.const 0))))
    (if (i32.eq (local.get $k) (i32.const 0x7373696d)) ;; "miss"
      (then
        (call $report
          (call $get (i32.const 0) (i32.const 32) (i32.const 5) (i32.const 80000) (i32.const 100))
          (i32.const 0) (i32.const -1))
        (return (i32.const 0))))
    (if (i32.eq (local.get $k) (i32.const 0x5f6c6564)) ;; "del_"
      (then
        (call $report (call $del (i32.const 0) (i32.const 16) (i32.const 2)) (i32.const 0) (i32.const -1))
        (return (i32.const 0))))
    (if (i32.eq (local.get $k) (i32.const 0x5f676962)) ;; "big_"
      (then
        (call $report
          (call $put (i32.const 0) (i32.const 16) (i32.const 2) (i32.const 0) (i32.const 1048577))
          (i32.const 0) (i32.const -1))
        (return (i32.const 0))))
    (if (i32.eq (local.get $k) (i32.const 0x6b676962)) ;; "bigk"
      (then
        (call $report
          (call $put (i32.const 0) (i32.const 0) (i32.const 4097) (i32.const 16) (i32.const 1))
          (i32.const 0) (i32.const -1))
        (return (i32.const 0))))
    (if (i32.eq (local.get $k) (i32.const 0x6e616373)) ;; "scan"
      (then
        (local.set $c (call $scan_open (i32.const 0) (i32.const 48) (i32.const 1) (i32.const 0) (i32.const 0)))
        (if (i32.lt_s (local.get $c) (i32.const 0))
          (then (call $report (local.get $c) (i32.const 0) (i32.const -1)) (return (i32.const 0))))
        (block $done
          (loop $next
            (local.set $r (call $scan_next (local.get $c) (i32.const 80000) (i32.const 16)))
            (br_if $done (i32.eqz (local.get $r)))
            (if (i32.gt_s (local.get $r) (i32.const 16))
              (then (local.set $r (call $scan_next (local.get $c) (i32.const 80000) (i32.const 4096)))))
            (if (i32.lt_s (local.get $r) (i32.const 0))
              (then (call $report (local.get $r) (i32.const 0) (i32.const -1)) (br $done)))
            (call $report (local.get $r) (i32.const 80000) (local.get $r))
            (br $next)))
        (drop (call $scan_close (local.get $c)))
        (return (i32.const 0))))
    (if (i32.eq (local.get $k) (i32.const 0x6b61656c)) ;; "leak"
      (then
        (loop $open
          (local.set $r (call $scan_open (i32.const 0) (i32.const 48) (i32.const 1) (i32.const 0) (i32.const 0)))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br_if $open (i32.lt_u (local.get $i) (i32.const 17))))
        (call $report (local.get $r) (i32.const 0) (i32.const -1))
        (return (i32.const 0))))
    (if (i32.eq (local.get $k) (i32.const 0x396f7473)) ;; "sto9"
      (then
        (call $report
          (call $get (i32.const 9) (i32.const 16) (i32.const 2) (i32.const 80000) (i32.const 4))
          (i32.const 0) (i32.const -1))
        (return (i32.const 0))))
    (if (i32.eq (local.get $k) (i32.const 0x73727563)) ;; "curs"
      (then
        (call $report
          (call $scan_next (i32.const 99) (i32.const 80000) (i32.const 16))
          (i32.const 0) (i32.const -1))
        (return (i32.const 0))))
    (i32.const 1))
)
