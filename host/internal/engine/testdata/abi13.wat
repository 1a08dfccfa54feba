;; abi13: speaks versions 1 and 3; the host picks 1. It also has an extra
;; export a future version might define, which the host ignores.
(module
  (memory (export "memory") 1)
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_abi_version_3"))
  (func (export "wasmstream_timer") (param i64) (result i32) (i32.const 0))
  (func (export "wasmstream_input") (param $n i32) (result i32) (i32.const 1024))
  (func (export "wasmstream_process") (param $n i32) (result i32) (i32.const 0))
)
