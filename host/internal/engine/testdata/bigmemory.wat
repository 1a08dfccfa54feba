;; bigmemory: asks for 128 MiB of memory up front (2048 pages).
(module
  (memory (export "memory") 2048)
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param $n i32) (result i32) (i32.const 1024))
  (func (export "wasmstream_process") (param $n i32) (result i32) (i32.const 0))
)
