;; abi3: a plugin for a future ABI version 3 only.
(module
  (memory (export "memory") 1)
  (func (export "wasmstream_abi_version_3"))
  (func (export "wasmstream_input") (param $n i32) (result i32) (i32.const 1024))
  (func (export "wasmstream_process") (param $n i32) (result i32) (i32.const 0))
)
