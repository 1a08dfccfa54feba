;; initemit: wasmstream_init emits a record and ignores the result (emit is
;; only allowed while processing a record).
(module
  (import "wasmstream" "emit" (func $emit (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 1024) "\00\00\00\00\00\00\00\00\ff\ff\ff\ff\ff\ff\ff\ff\ff\ff\ff\ff\00\00\00\00\ff\ff\ff\ff\ff\ff\ff\ff\00\00\00\00")
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param $n i32) (result i32) (i32.const 2048))
  (func (export "wasmstream_init") (result i32)
    (i32.store (i32.const 0) (call $emit (i32.const 1024) (i32.const 36)))
    (i32.const 0))
  (func (export "wasmstream_process") (param $n i32) (result i32) (i32.const 0))
)
