;; passthrough2: the passthrough plugin in ABI version 2 (abi/ABI.md
;; section 10): wasmstream_batch forwards every record of a batch to output
;; 0 in place (its offset field set to -1, its index to 0; the slot's
;; length field and the record are the call's one emit entry). It also
;; speaks version 1, as passthrough does. The input buffer is a fixed
;; 1 MiB at 65536.
(module
  (import "wasmstream" "emit" (func $emit (param i32 i32) (result i32)))
  (memory (export "memory") 18)
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_abi_version_2"))
  (func (export "wasmstream_input") (param $n i32) (result i32)
    (if (i32.gt_u (local.get $n) (i32.const 1048576)) (then (return (i32.const 0))))
    (i32.const 65536))
  (func (export "wasmstream_process") (param $n i32) (result i32)
    (i64.store (i32.const 65544) (i64.const -1)) ;; offset
    (i32.store (i32.const 65556) (i32.const 0))  ;; index: output 0
    (if (i32.lt_s (call $emit (i32.const 65536) (local.get $n)) (i32.const 0))
      (then (return (i32.const 1))))
    (i32.const 0))
  (func (export "wasmstream_batch") (param $len i32) (result i32)
    (local $count i32) (local $i i32) (local $s i32) (local $plen i32)
    (local.set $count (i32.load (i32.const 65536)))
    (local.set $s (i32.const 65552))
    (block $out
      (loop $slot
        (br_if $out (i32.ge_u (local.get $i) (local.get $count)))
        (local.set $plen (i32.load offset=20 (local.get $s)))
        (i64.store offset=32 (local.get $s) (i64.const -1)) ;; the record's offset
        (i32.store offset=44 (local.get $s) (i32.const 0))  ;; its index: output 0
        (i32.store offset=4 (local.get $s) (i32.const 0))   ;; status OK
        (i32.store offset=8 (local.get $s) (i32.add (local.get $s) (i32.const 20)))
        (i32.store offset=12 (local.get $s) (i32.add (local.get $plen) (i32.const 4)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (i32.store (i32.const 65540) (local.get $i))         ;; done
        (br_if $out (i32.load (i32.const 65544)))            ;; stop
        (local.set $s (i32.add (local.get $s) (i32.and (i32.add (i32.add (local.get $plen) (i32.const 24)) (i32.const 7)) (i32.const -8))))
        (br $slot)))
    (i32.const 0))
)
