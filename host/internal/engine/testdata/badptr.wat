;; badptr: each key makes one bad host call, ignores its error result, then
;; passes the record through with the call's result as the partition and
;; returns StatusOK (the host must fail the record anyway):
;;   "emit" emit from a pointer past the end of memory
;;   "long" emit with a length that runs off the end of memory
;;   "logp" log from a pointer at the end of memory
;;   "cfgp" config into a buffer that runs off the end of memory
;; Any other key: partition 0.
(module
  (import "wasmstream" "emit" (func $emit (param i32 i32) (result i32)))
  (import "wasmstream" "log" (func $log (param i32 i32 i32) (result i32)))
  (import "wasmstream" "config" (func $config (param i32 i32) (result i32)))
  (memory (export "memory") 2)
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param $n i32) (result i32)
    (if (i32.gt_u (local.get $n) (i32.const 65536)) (then (return (i32.const 0))))
    (i32.const 1024))
  (func (export "wasmstream_process") (param $n i32) (result i32)
    (local $k i32) (local $r i32)
    (if (i32.eq (i32.load (i32.const 1048)) (i32.const 4))
      (then
        (local.set $k (i32.load (i32.const 1060)))
        (if (i32.eq (local.get $k) (i32.const 0x74696d65)) ;; "emit"
          (then (local.set $r (call $emit (i32.const 0xfffff000) (i32.const 100)))))
        (if (i32.eq (local.get $k) (i32.const 0x676e6f6c)) ;; "long"
          (then (local.set $r (call $emit (i32.const 1024) (i32.const 0x1ffff)))))
        (if (i32.eq (local.get $k) (i32.const 0x70676f6c)) ;; "logp"
          (then (local.set $r (call $log (i32.const 1) (i32.const 0x20000) (i32.const 1)))))
        (if (i32.eq (local.get $k) (i32.const 0x70676663)) ;; "cfgp"
          (then (local.set $r (call $config (i32.const 0x1fff0) (i32.const 100)))))))
    (i64.store (i32.const 1032) (i64.const -1))
    (i32.store (i32.const 1040) (local.get $r)) ;; partition = the bad call's result
    (i32.store (i32.const 1044) (i32.const 0))
    (drop (call $emit (i32.const 1024) (local.get $n)))
    (i32.const 0))
)
