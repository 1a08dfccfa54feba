;; missingprocess: no wasmstream_process export.
(module
  (memory (export "memory") 1)
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param $n i32) (result i32) (i32.const 1024))
)
