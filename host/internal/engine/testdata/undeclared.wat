;; undeclared: emits the input record to output index 7 and ignores the
;; result (a plugin bug the host must catch).
(module
  (import "wasmstream" "emit" (func $emit (param i32 i32) (result i32)))
  (memory (export "memory") 2)
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param $n i32) (result i32)
    (if (i32.gt_u (local.get $n) (i32.const 65536)) (then (return (i32.const 0))))
    (i32.const 1024))
  (func (export "wasmstream_process") (param $n i32) (result i32)
    (i64.store (i32.const 1032) (i64.const -1))
    (i32.store (i32.const 1044) (i32.const 7))
    (drop (call $emit (i32.const 1024) (local.get $n)))
    (i32.const 0))
)
