;; initemit: wasmstream_init tries to emit a record and to read state, which
;; are not allowed during init, and keeps the two results. Each record then
;; emits the 36-byte record at 1024 with partition = the emit result and
;; timestamp = the state_get result.
(module
  (import "wasmstream" "emit" (func $emit (param i32 i32) (result i32)))
  (import "wasmstream" "state_get" (func $get (param i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 1024) "\00\00\00\00\00\00\00\00\ff\ff\ff\ff\ff\ff\ff\ff\ff\ff\ff\ff\00\00\00\00\ff\ff\ff\ff\ff\ff\ff\ff\00\00\00\00")
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param $n i32) (result i32)
    (if (i32.gt_u (local.get $n) (i32.const 4096)) (then (return (i32.const 0))))
    (i32.const 2048))
  (func (export "wasmstream_init") (result i32)
    (i32.store (i32.const 0) (call $emit (i32.const 1024) (i32.const 36)))
    (i32.store (i32.const 4) (call $get (i32.const 0) (i32.const 1024) (i32.const 1) (i32.const 8) (i32.const 8)))
    (i32.const 0))
  (func (export "wasmstream_process") (param $n i32) (result i32)
    (i64.store (i32.const 1024) (i64.extend_i32_s (i32.load (i32.const 4))))
    (i32.store (i32.const 1040) (i32.load (i32.const 0)))
    (drop (call $emit (i32.const 1024) (i32.const 36)))
    (i32.const 0))
)
