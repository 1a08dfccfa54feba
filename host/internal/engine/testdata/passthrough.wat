;; passthrough: the smallest real plugin. Emits the input record back to
;; output 0 with offset -1. The input buffer is a fixed 64 KiB at 1024.
(module
  (import "wasmstream" "emit" (func $emit (param i32 i32) (result i32)))
  (memory (export "memory") 2)
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param $n i32) (result i32)
    (if (i32.gt_u (local.get $n) (i32.const 65536)) (then (return (i32.const 0))))
    (i32.const 1024))
  (func (export "wasmstream_process") (param $n i32) (result i32)
    (i64.store (i32.const 1032) (i64.const -1)) ;; offset
    (i32.store (i32.const 1044) (i32.const 0))  ;; index: output 0
    (if (i32.lt_s (call $emit (i32.const 1024) (local.get $n)) (i32.const 0))
      (then (return (i32.const 1))))
    (i32.const 0))
)
