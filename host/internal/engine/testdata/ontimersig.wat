;; ontimersig: exports wasmstream_on_timer with a wrong signature.
(module
  (memory (export "memory") 1)
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param i32) (result i32) (i32.const 1024))
  (func (export "wasmstream_process") (param i32) (result i32) (i32.const 0))
  (func (export "wasmstream_on_timer") (param i64) (result i32) (i32.const 0)))
