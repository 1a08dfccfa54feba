;; reserved: exports a name in the engine's reserved namespace.
(module
  (memory (export "memory") 1)
  (global (export "__wasmstream_interrupt") (mut i32) (i32.const 0))
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param $n i32) (result i32) (i32.const 1024))
  (func (export "wasmstream_process") (param $n i32) (result i32) (i32.const 0))
)
