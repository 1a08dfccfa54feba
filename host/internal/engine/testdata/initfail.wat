;; initfail: wasmstream_init rejects its configuration with set_error.
(module
  (import "wasmstream" "set_error" (func $set_error (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "bad config: missing field \22threshold\22")
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param $n i32) (result i32) (i32.const 1024))
  (func (export "wasmstream_init") (result i32)
    (drop (call $set_error (i32.const 16) (i32.const 37)))
    (i32.const 1))
  (func (export "wasmstream_process") (param $n i32) (result i32) (i32.const 0))
)
